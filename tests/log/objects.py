"""Test access to a local log's objects, to damage them as a disk or an operator could."""

from __future__ import annotations

from pathlib import Path

from streaming.log import PartitionLog


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
