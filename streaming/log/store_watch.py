"""Calls to a remote state store that stop answering: tried again until it answers, and said while they wait.

A store's client waits and retries inside its own calls, so a store that stops answering would hold its
caller (a driver's manifest write, a task's segment read) silently, and a store that restarts would fail
it: a task's error, a failed job. So each attempt has a deadline of its own (the client's timeouts, set
where the store is opened), a call the store did not answer (``StoreUnanswered``) is tried again after a
pause, and the call is noted from its first attempt to its answer. A thread of the process says, once a
call has had no answer for SAY_AFTER_S, what waits and since when, again every REPEAT_S, and that the store
answers again when it does. A refusal (a missing object, denied access) is no outage: it is raised at once.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import threading
import time
from dataclasses import dataclass
from typing import Callable, Iterator, TypeVar

from streaming.utc import Outage

log = logging.getLogger(__name__)

SAY_AFTER_S = 5.0
REPEAT_S = 15.0
TICK_S = 1.0
FIRST_PAUSE_S = 0.1  # between attempts, doubling up to MAX_PAUSE_S: a restarted store is used within 2 s
MAX_PAUSE_S = 2.0

T = TypeVar("T")


class StoreUnanswered(OSError):
    """The store did not answer an attempt (a refused or reset connection, a deadline passed, a 5xx): worth
    another attempt, unlike a refusal. Each store's client says which of its errors these are."""


@dataclass
class _Call:
    what: str          # "a read of <path>"
    since: float       # monotonic: its start, or when its data last moved
    since_ms: int      # the same, as wall time
    unanswered: bool = False  # an attempt failed unanswered: the wait counts on until the call ends


class StoreWatch:
    """The calls in flight to one process's remote stores, and the thread that says which of them wait."""

    def __init__(self) -> None:
        self._calls: dict[int, _Call] = {}
        self._ids = itertools.count()
        self._lock = threading.Lock()
        self._pid: int | None = None  # the thread is this process's: a forked worker starts its own
        self.outage = Outage()  # since when a call has waited, while one does: the progress line says it
        self._next_say = 0.0
        self._mine = threading.local()  # this thread's calls in flight, innermost last

    @contextlib.contextmanager
    def call(self, what: str) -> Iterator[_Call]:
        """A call to the store in flight while the block runs, this thread's innermost."""
        if self._pid != os.getpid():
            self._start_thread()
        key = next(self._ids)
        call = _Call(what, time.monotonic(), time.time_ns() // 1_000_000)
        with self._lock:
            self._calls[key] = call
        stack = self._mine.__dict__.setdefault("calls", [])
        stack.append(call)
        try:
            yield call
        finally:
            stack.pop()
            with self._lock:
                del self._calls[key]

    def moved(self) -> None:
        """This thread's innermost call moved data: the store answers it, however long the whole call takes
        (a large upload), so its wait counts from now. Not once an attempt of it went unanswered: an attempt
        that moves data into a client's buffers proves nothing of the store."""
        stack = self._mine.__dict__.get("calls")
        with self._lock:
            if stack and not stack[-1].unanswered:
                stack[-1].since, stack[-1].since_ms = time.monotonic(), time.time_ns() // 1_000_000

    def answered(self, what: str, attempt: Callable[[], T]) -> T:
        """What ``attempt`` returns once the store answers it: tried again while it raises StoreUnanswered,
        under one watched call, so the wait is said from the first attempt on."""
        with self.call(what) as call:
            pause = FIRST_PAUSE_S
            while True:
                try:
                    return attempt()
                except StoreUnanswered as exc:
                    with self._lock:
                        call.unanswered = True
                    log.debug("%s: %s; trying again in %.1fs", what, exc, pause)
                    time.sleep(pause)
                    pause = min(2 * pause, MAX_PAUSE_S)

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


WATCH = StoreWatch()
