"""What a compaction task has read or written, kept for its next read of the same records: its map reads each new
segment's keys, and its rewrite or its emission reads the same objects moments later; its rewrite writes a cleaned
object, and its emission reads it back. On an object store each second read is a request a log a stage, and on any
storage the records are decoded and checked a second time."""

from __future__ import annotations

import threading
from typing import Iterable, Iterator

import pyarrow as pa

from streaming.log.columns import LOG_BATCH_SCHEMA

KEEP_BYTES = 32 << 20  # a task's at most: what does not fit is read again, as without a keep

# an object's checked bytes (as its map read them), or its records (as its rewrite wrote them)
Kept = bytes | tuple[pa.RecordBatch, ...]


def _size(kept: Kept) -> int:
    return len(kept) if isinstance(kept, bytes) else sum(b.nbytes for b in kept)


class ReadKeep:
    """Objects by path, each given back once; past ``limit`` bytes nothing more is kept. Objects are written once
    under a unique name, so what is kept is the object's for as long as any manifest names it."""

    def __init__(self, limit: int = KEEP_BYTES) -> None:
        self._limit = limit
        self._held = 0
        self._kept: dict[str, Kept] = {}
        self._lock = threading.Lock()  # a task's logs are read on its I/O threads

    def keep(self, path: str, kept: Kept) -> None:
        size = _size(kept)
        with self._lock:
            if path not in self._kept and self._held + size <= self._limit:
                self._kept[path] = kept
                self._held += size

    def take(self, path: str) -> Kept | None:
        with self._lock:
            kept = self._kept.pop(path, None)
            if kept is not None:
                self._held -= _size(kept)
            return kept

    def room(self) -> int:
        with self._lock:
            return self._limit - self._held


class WrittenRecords:
    """The records of an object being written, as they pass to its writer, for the keep once it is written
    (``kept``): none without a keep, where they outgrow its room, or are not the log's batches as a read decodes
    them."""

    def __init__(self, keep: ReadKeep | None, batches: Iterable[pa.RecordBatch]) -> None:
        self._keep = keep
        self._batches = batches
        self._room = 0 if keep is None else keep.room()
        self._seen: list[pa.RecordBatch] | None = None if keep is None else []

    def __iter__(self) -> Iterator[pa.RecordBatch]:
        for batch in self._batches:
            if self._seen is not None and batch.num_rows:
                self._room -= batch.nbytes
                if self._room < 0 or not batch.schema.equals(LOG_BATCH_SCHEMA):
                    self._seen = None
                else:
                    self._seen.append(batch)
            yield batch

    def kept(self, path: str) -> None:
        if self._keep is not None and self._seen:
            self._keep.keep(path, tuple(self._seen))
