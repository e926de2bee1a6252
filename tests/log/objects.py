"""Test access to a local log's objects, to damage them as a disk or an operator could, and to what a log asks
of the disk."""

from __future__ import annotations

import os
from pathlib import Path

from streaming.log import PartitionLog, storage


def segment_object(plog: PartitionLog, index: int = 0, chunk: int = -1) -> Path:
    """The file of one object of the index-th segment (by default its last object)."""
    return Path(plog.object_path(plog.segments[index].chunks[chunk].name))


class PatchedStorage:
    """A storage with some calls replaced (a crash, a torn write), the rest passed through."""

    def __init__(self, inner, **calls) -> None:
        self._inner = inner
        self.__dict__.update(calls)

    def __getattr__(self, name: str):
        return getattr(self._inner, name)


def disk_syncs(monkeypatch) -> list[str]:
    """Each fsync and syncfs asked of the disk from now on ("fsync", "syncfs"), in order; each still made."""
    asked: list[str] = []
    real_fsync, real_syncfs = os.fsync, storage.syncfs
    monkeypatch.setattr(os, "fsync", lambda fd: (asked.append("fsync"), real_fsync(fd))[1])
    monkeypatch.setattr(storage, "syncfs", lambda fd: (asked.append("syncfs"), real_syncfs(fd))[1])
    return asked
