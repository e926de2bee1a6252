"""A segment's records read from its objects by whoever holds its manifest entry: the log itself, and the
readers beside a running job (the cleaner's live state, dump) that do not open the log."""

from __future__ import annotations

import posixpath
from typing import Iterator

import pyarrow as pa

from streaming.log.manifest import objects_dir
from streaming.log.segment import SegmentMeta, read_batches, read_keys_checked, read_verified
from streaming.log.storage import Storage


def read_segment(storage: Storage, directory: str, seg: SegmentMeta, check: bool = True) -> Iterator[pa.RecordBatch]:
    """All records of a segment of the log in ``directory``, object by object; with ``check``, each
    object's bytes are checked first and damage raises CorruptSegmentError."""
    for c in seg.chunks:
        path = posixpath.join(objects_dir(directory), c.name)
        yield from read_verified(storage, path, c) if check else read_batches(storage, path)


def read_segment_keys(storage: Storage, directory: str, seg: SegmentMeta) -> Iterator[pa.RecordBatch]:
    """The keys of a segment's records (PartitionLog.segment_keys), each object's bytes checked first."""
    for c in seg.chunks:
        yield from read_keys_checked(storage, posixpath.join(objects_dir(directory), c.name), c)
