"""Checked bytes of small objects a task has read, kept for its next read of them: a compaction task's map reads
each new segment's keys, and its rewrite or its emission reads the same objects moments later. On an object store
that second read is a request a log a stage."""

from __future__ import annotations

import threading

KEEP_BYTES = 32 << 20  # a task's at most: what does not fit is read again, as without a keep


class ReadKeep:
    """Bytes by object path, each given back once; past ``limit`` bytes nothing more is kept. Objects are
    written once under a unique name, so bytes kept are the object's for as long as any manifest names it."""

    def __init__(self, limit: int = KEEP_BYTES) -> None:
        self._limit = limit
        self._held = 0
        self._kept: dict[str, bytes] = {}
        self._lock = threading.Lock()  # a task's logs are read on its I/O threads

    def keep(self, path: str, data: bytes) -> None:
        with self._lock:
            if path not in self._kept and self._held + len(data) <= self._limit:
                self._kept[path] = data
                self._held += len(data)

    def take(self, path: str) -> bytes | None:
        with self._lock:
            data = self._kept.pop(path, None)
            if data is not None:
                self._held -= len(data)
            return data
