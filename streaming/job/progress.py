"""How far a run has got, shown while it runs: in place on a terminal, as a log line every 10 s elsewhere.

A long run (a first --once over a big topic) spends minutes in one micro-batch, and its totals move only
when a batch ends; the phase line (which batch, how many of its partition tasks are done) is what shows it
is moving meanwhile. The display is rich's Live, on stderr, with log lines printed above it.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from dataclasses import dataclass
from typing import Callable, Mapping

from streaming.runtime import logging_setup
from streaming.utc import Outage

log = logging.getLogger(__name__)

LINE_EVERY_S = 10.0


@dataclass(frozen=True)
class Progress:
    phase: str  # what the job is doing now, e.g. "ingesting batch 3: 2/4 partitions"
    ingested: int
    ingest_lag: int | None  # records the source holds that the logs do not yet; None until first measured
    passes: int
    emitted: int
    elapsed_s: float
    waits: tuple[str, ...] = ()  # what the job waits on, and since when: "the sink cluster since T UTC (Ns)"

    def line(self, rate: float) -> str:
        lag = "-" if self.ingest_lag is None else f"{self.ingest_lag:,}"
        waiting = "".join(f"; waiting for {w}" for w in self.waits)
        return (f"progress: {self.ingested:,} records ingested ({rate:,.0f}/s), lag {lag}, {self.passes} passes, "
                f"{self.emitted:,} records emitted, {self.elapsed_s:.0f}s; {self.phase}{waiting}")


def waits(outages: Mapping[str, Outage], now_ms: int) -> tuple[str, ...]:
    """``what since T UTC (Ns)`` for each of ``outages`` (what -> its Outage) that lasts."""
    return tuple(f"{what} {since}" for what, outage in outages.items() if (since := outage.lasting(now_ms)))


class ProgressDisplay:
    """Polls ``snapshot`` from a thread of its own; ``live``: refresh in place (a terminal), else log lines."""

    def __init__(self, snapshot: Callable[[], Progress], live: bool) -> None:
        self.snapshot = snapshot
        self.live = live
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="progress", daemon=True)
        self._last: tuple[float, int] = (time.monotonic(), 0)

    @staticmethod
    def wanted_live(log_format: str) -> bool:
        return log_format == "text" and sys.stderr.isatty()

    def _rate(self, p: Progress) -> float:
        then, count = self._last
        now = time.monotonic()
        rate = (p.ingested - count) / (now - then) if now > then and p.ingested >= count else 0.0
        if p.ingested != count:
            self._last = (now, p.ingested)
        return rate

    def __enter__(self) -> "ProgressDisplay":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        if self.live:
            self._run_live()
            return
        while True:  # a line at once, then every LINE_EVERY_S: the first says what the job starts with
            p = self.snapshot()
            log.info("%s", p.line(self._rate(p)))
            if self._stop.wait(LINE_EVERY_S):
                return

    def _run_live(self) -> None:
        from rich.console import Console  # noqa: PLC0415 (only a terminal needs it)
        from rich.live import Live  # noqa: PLC0415
        from rich.text import Text  # noqa: PLC0415

        rate = 0.0
        with Live(Text(""), console=Console(stderr=True), refresh_per_second=2, transient=True,
                  redirect_stderr=True) as live:
            logging_setup.route_through(sys.stderr)  # rich's proxy while live: log lines go above the display
            try:
                while not self._stop.wait(0.5):
                    p = self.snapshot()
                    rate = self._rate(p) if p.ingested != self._last[1] else rate
                    live.update(Text(p.line(rate)))
            finally:
                logging_setup.route_through(None)
