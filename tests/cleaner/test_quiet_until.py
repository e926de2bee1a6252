"""quiet_until: until when a log needs neither a pass nor a forced roll if no record arrives, so a stage gives it
no task (job.stage_plan). Each time that can wake a log is pinned here, and a log due now is never quiet."""

from __future__ import annotations

from streaming.cleaner import CompactionConfig, log_to_clean, quiet_until
from streaming.configuration.settings import LONG_MAX
from streaming.log.segment import SegmentMeta
from streaming.partition_id import PartitionId

PID = PartitionId("t", 0)
HOUR = 3_600_000


def seg(base: int, count: int, first_ts: int, last_ts: int, horizon: int | None = None) -> SegmentMeta:
    return SegmentMeta(base, base + count, base + count - 1 if count else None, count, 100 * count, first_ts if count else None,
                       last_ts if count else None, min_delete_horizon_ms=horizon)


def quiet(segments: list[SegmentMeta], config: CompactionConfig, now: int, checkpoint: int | None = None) -> int | None:
    return quiet_until(segments, log_to_clean(segments, PID, checkpoint, config, now), config, now)


def test_a_cleaned_log_with_an_unbounded_lag_waits_only_for_records() -> None:
    segments = [seg(0, 10, 0, 9), seg(10, 0, 0, 0)]
    assert quiet(segments, CompactionConfig(), now=HOUR, checkpoint=10) == LONG_MAX


def test_the_active_segment_is_quiet_until_its_kip354_roll() -> None:
    config = CompactionConfig(max_compaction_lag_ms=HOUR)
    segments = [seg(0, 10, 1_000, 2_000)]
    assert quiet(segments, config, now=5_000) == 1_000 + HOUR, "KIP-354: its first record may wait this long"
    assert quiet(segments, config, now=1_000 + HOUR + 1) is None, "the roll is due: a task runs it"


def test_a_dirty_segment_under_min_compaction_lag_wakes_when_the_lag_passes() -> None:
    config = CompactionConfig(min_compaction_lag_ms=HOUR)
    segments = [seg(0, 10, 0, 9), seg(10, 30, 1_000, 2_000), seg(40, 0, 0, 0)]
    assert quiet(segments, config, now=3_000, checkpoint=10) == 2_000 + HOUR
    assert quiet(segments, config, now=2_000 + HOUR + 1, checkpoint=10) is None


def test_a_tombstone_wakes_its_log_at_its_delete_horizon() -> None:
    segments = [seg(0, 10, 0, 9, horizon=50_000), seg(10, 0, 0, 0)]
    assert quiet(segments, CompactionConfig(), now=1_000, checkpoint=10) == 50_000
    assert quiet(segments, CompactionConfig(), now=50_000, checkpoint=10) is None


def test_an_eligible_log_is_never_quiet() -> None:
    segments = [seg(0, 10, 0, 9), seg(10, 0, 0, 0)]
    assert quiet(segments, CompactionConfig(), now=HOUR) is None, "never cleaned: all of it is dirty"
