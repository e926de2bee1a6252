"""log.cleaner.io.max.bytes.per.second: sleep when the cleaner's I/O runs ahead of the allowed rate."""

from __future__ import annotations

import time
from typing import Callable


class Throttler:
    def __init__(self, bytes_per_second: float, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep, check_interval_s: float = 0.3) -> None:
        self.rate = bytes_per_second
        self.clock = clock
        self.sleep = sleep
        self.check_interval_s = check_interval_s
        self._start = clock()
        self._bytes = 0.0

    def maybe_throttle(self, nbytes: float) -> None:
        if self.rate == float("inf"):
            return
        self._bytes += nbytes
        elapsed = self.clock() - self._start
        if elapsed < self.check_interval_s and self._bytes < self.rate * self.check_interval_s:
            return
        ahead = self._bytes / self.rate - elapsed
        if ahead > 0:
            self.sleep(ahead)
        self._start = self.clock()
        self._bytes = 0.0
