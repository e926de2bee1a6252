"""Locks on a local state dir: one compactor per state dir, and one writer per partition log at a time.

The state-dir lock stops a second job, but a task of a killed job can outlive its driver for a moment (a
Python worker finishing an append). Every task that touches a log holds this lock, so a restarted job's
task waits for the zombie's instead of being fenced by it. Object stores have no locks: there the logs'
manifests fence a second writer (streaming.log.manifest), and the sink's transactional ids fence a second
emitter.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from typing import Iterator

from streaming.errors import JobError
from streaming.state.layout import state_lock_file, writer_lock_file
from streaming.state.stores import StateDir


class StateDirLock:
    """One compactor per local state directory: a second one would be fenced by the first at every turn."""

    def __init__(self, state: StateDir) -> None:
        self._fd: int | None = None
        if not state.local:
            return
        state_dir = state.root
        try:
            os.makedirs(state_dir, mode=0o700, exist_ok=True)  # a copy of the mirrored data: its owner's only
            self._fd = os.open(state_lock_file(state), os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as exc:
            raise JobError(f"--state-dir {state.uri}: cannot create {exc.filename or state_dir}: "
                           f"{exc.strerror}") from None
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(self._fd, 64, 0).decode(errors="replace").strip() or "another process"
            os.close(self._fd)
            raise JobError(f"state dir {state_dir} is in use by another compactor (pid {holder}); "
                           f"stop it first or choose another --state-dir") from None
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, str(os.getpid()).encode(), 0)

    def release(self) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)


@contextlib.contextmanager
def partition_lock(state: StateDir, directory: str, timeout_s: float = 300.0) -> Iterator[None]:
    if not state.local:
        yield
        return
    os.makedirs(directory, exist_ok=True)
    fd = os.open(writer_lock_file(directory), os.O_RDWR | os.O_CREAT, 0o644)
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
