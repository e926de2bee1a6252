"""A segment's records read from its objects by whoever holds its manifest entry: the log itself, and the
readers beside a running job (the cleaner's live state, dump) that do not open the log."""

from __future__ import annotations

import posixpath
from typing import Iterator

import pyarrow as pa

from streaming.log.columns import decode_key_batch
from streaming.log.manifest import objects_dir
from streaming.log.read_keep import ReadKeep
from streaming.log.segment import (SegmentMeta, decode_object, fetch_verified, fits_buffer, read_batches,
                                   read_keys_checked, read_verified)
from streaming.log.storage import Storage


def read_segment(storage: Storage, directory: str, seg: SegmentMeta, check: bool = True,
                 keep: ReadKeep | None = None) -> Iterator[pa.RecordBatch]:
    """All records of a segment of the log in ``directory``, object by object; with ``check``, each
    object's bytes are checked first and damage raises CorruptSegmentError. An object whose checked bytes
    ``keep`` holds is decoded from them, not read."""
    for c in seg.chunks:
        path = posixpath.join(objects_dir(directory), c.name)
        data = None if keep is None else keep.take(path)
        if data is not None:
            yield from decode_object(path, data)
        else:
            yield from read_verified(storage, path, c) if check else read_batches(storage, path)


def read_segment_keys(storage: Storage, directory: str, seg: SegmentMeta,
                      keep: ReadKeep | None = None) -> Iterator[pa.RecordBatch]:
    """The keys of a segment's records (PartitionLog.segment_keys), each object's bytes checked first. With
    ``keep``, an object that fits the read buffer is read whole and its bytes kept for the next read."""
    for c in seg.chunks:
        path = posixpath.join(objects_dir(directory), c.name)
        if keep is None or not fits_buffer(c):
            yield from read_keys_checked(storage, path, c)
            continue
        data = fetch_verified(storage, path, c)
        yield from decode_object(path, data, decode_key_batch)
        keep.keep(path, data)
