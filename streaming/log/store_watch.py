"""Calls to a remote state store that stop answering, said while they wait.

Arrow's S3 client retries inside its own calls, so a store that stops answering holds its caller (a
driver's manifest write, a task's segment read) silently for as long as the client retries. Each call is
noted as it starts and touched as its data moves; a thread of the process says, once a call has had no
answer for SAY_AFTER_S, what waits and since when, again every REPEAT_S, and that the store answers again
when it does. The call itself is left alone: it ends with the client's own error, or goes on once the store
is back.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import threading
import time
from dataclasses import dataclass
from typing import BinaryIO, Callable, Iterator

from streaming.utc import Outage

log = logging.getLogger(__name__)

SAY_AFTER_S = 5.0
REPEAT_S = 15.0
TICK_S = 1.0


@dataclass
class _Call:
    what: str          # "a read of <path>"
    since: float       # monotonic
    since_ms: int      # the same, as wall time


class StoreWatch:
    """The calls in flight to one process's remote stores, and the thread that says which of them wait."""

    def __init__(self) -> None:
        self._calls: dict[int, _Call] = {}
        self._ids = itertools.count()
        self._lock = threading.Lock()
        self._pid: int | None = None  # the thread is this process's: a forked worker starts its own
        self.outage = Outage()  # since when a call has waited, while one does: the progress line says it
        self._next_say = 0.0

    def begin(self, what: str) -> int:
        if self._pid != os.getpid():
            self._start_thread()
        key = next(self._ids)
        with self._lock:
            self._calls[key] = _Call(what, time.monotonic(), time.time_ns() // 1_000_000)
        return key

    def end(self, key: int) -> None:
        with self._lock:
            del self._calls[key]

    @contextlib.contextmanager
    def call(self, what: str) -> Iterator[None]:
        key = self.begin(what)
        try:
            yield
        finally:
            self.end(key)

    def _start_thread(self) -> None:
        with self._lock:
            if self._pid != os.getpid():
                self._pid = os.getpid()
                threading.Thread(target=self._run, name="kcompact-store-watch", daemon=True).start()

    def _run(self) -> None:
        while True:
            time.sleep(TICK_S)
            self.check(time.monotonic())

    def check(self, now: float) -> None:
        """Says the oldest call without an answer for SAY_AFTER_S, or that the store answers again."""
        with self._lock:
            stalled = [c for c in self._calls.values() if now - c.since >= SAY_AFTER_S]
        now_ms = time.time_ns() // 1_000_000
        if stalled:
            oldest = min(stalled, key=lambda c: c.since)
            if now >= self._next_say:
                self._next_say = now + REPEAT_S
                more = f" ({len(stalled)} calls wait)" if len(stalled) > 1 else ""
                log.warning("waiting for the state store %s: %s has had no answer%s; the job goes on when it "
                            "answers", self.outage.failed(now_ms, oldest.since_ms), oldest.what, more)
        elif self.outage.since_ms is not None:
            log.warning("the state store answers again, after %.0fs", (now_ms - self.outage.since_ms) / 1000)
            self.outage.ended()
            self._next_say = 0.0


class WatchedStream:
    """A store's stream, each read and write a watched call: time spent between calls (a reader that
    waits on the sink, say) is not the store's."""

    def __init__(self, stream: BinaryIO, what: str) -> None:
        self._stream, self._what = stream, what

    def read(self, *args: int) -> bytes:
        key = WATCH.begin(self._what)
        try:
            return self._stream.read(*args)
        finally:
            WATCH.end(key)

    def write(self, data: bytes) -> int:
        key = WATCH.begin(self._what)
        try:
            return self._stream.write(data)
        finally:
            WATCH.end(key)

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


@contextlib.contextmanager
def watched_stream(what: str, opener: Callable[[], BinaryIO]) -> Iterator[BinaryIO]:
    """The stream ``opener`` opens, its opening, reads, writes and closing (an object store's upload) each
    watched."""
    with WATCH.call(what):
        stream = opener()
    try:
        yield WatchedStream(stream, what)  # type: ignore[misc]
    finally:
        with WATCH.call(what):
            stream.close()


WATCH = StoreWatch()
