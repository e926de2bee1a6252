"""The compaction stages of idle triggers, run by a thread of their own while the main thread only waits.

A stage waits on whatever it calls. A state store that stops answering holds a write inside Arrow's S3
client, which returns to Python only when the call ends, and Python runs a signal handler only in the main
thread, between two bytecodes: a stage on the main thread kept Ctrl-C unheard for as long as the store was
away. The main thread waits on an event instead, which a signal interrupts.
"""

from __future__ import annotations

import threading
from typing import Callable


class IdleStages:
    def __init__(self, stage: Callable[[], None], batches: Callable[[], int], every_s: float,
                 lock: threading.RLock) -> None:
        """``stage`` runs on each tick at which ``batches`` (the micro-batches run so far) has not moved, when
        ``lock`` (the job's) is free: not while a micro-batch runs its own."""
        self.stage, self.batches, self.every_s, self.lock = stage, batches, every_s, lock
        self.failure: BaseException | None = None  # what ended the thread, for the main thread to raise
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name="kcompact-idle-stages", daemon=True)

    def __enter__(self) -> IdleStages:
        self._thread.start()
        return self

    def __exit__(self, *_exc) -> None:
        self._done.set()  # a stage in flight ends on its own; the caller waits for it under the job's lock

    def _run(self) -> None:
        seen = -1
        try:
            while not self._done.wait(self.every_s):
                if self.batches() == seen and self.lock.acquire(blocking=False):
                    try:
                        self.stage()
                    finally:
                        self.lock.release()
                seen = self.batches()
        except BaseException as exc:  # noqa: BLE001 (raised again by the main thread)
            self.failure = exc
