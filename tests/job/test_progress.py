"""The progress line says what the job waits on, and since when, while it waits."""

from __future__ import annotations

from streaming.job.progress import Progress, waits
from streaming.utc import Outage

NOW_MS = 1_795_795_200_000  # 2026-11-27 16:00:00 UTC


def test_the_progress_line_names_each_wait_that_lasts_and_since_when() -> None:
    sink, store = Outage(), Outage()
    sink.failed(NOW_MS - 15_000)
    line = Progress("cleaning and emitting 4 of 4 partitions", 10, 0, 1, 5, 20.0,
                    waits({"the sink cluster": sink, "the state store": store}, NOW_MS)).line(0.0)
    assert line.endswith("; cleaning and emitting 4 of 4 partitions; waiting for the sink cluster since "
                         "2026-11-27 15:59:45 UTC (15s)"), line
    sink.ended()
    assert "waiting" not in Progress("idle", 10, 0, 1, 5, 21.0, waits({"the sink cluster": sink}, NOW_MS)).line(0.0)
