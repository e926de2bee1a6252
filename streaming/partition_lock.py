"""One writer per partition log at a time, across processes.

The state-dir lock stops a second job, but a task of a killed job can outlive its driver for a moment (a
Python worker finishing an append). Every task that touches a log holds this lock, so a restarted job's
task waits for the zombie's instead of interleaving with it.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from typing import Iterator

LOCK_NAME = ".writer.lock"


@contextlib.contextmanager
def partition_lock(directory: str, timeout_s: float = 300.0) -> Iterator[None]:
    os.makedirs(directory, exist_ok=True)
    fd = os.open(os.path.join(directory, LOCK_NAME), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"partition log {directory} still locked by another writer after "
                                       f"{timeout_s:.0f}s") from None
                time.sleep(0.05)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock
