"""Where an append's records go: how many fit the active segment before segment.bytes rolls it, and the new
object that holds them, folded with the segment's small trailing objects as a binary counter carries; and the one
object of a cleaned segment, with the filter of its keys."""

from __future__ import annotations

import dataclasses
import io
import logging
import posixpath
import zlib
from typing import BinaryIO, Iterable

import numpy as np
import pyarrow as pa

from streaming.log.columns import lag_timestamps, offsets_of, record_sizes, validity
from streaming.log.key_filter import FilterBuilder, fingerprints
from streaming.log.manifest import objects_dir
from streaming.log.segment import Chunk, SegmentMeta, object_body, object_header, object_name, read_header
from streaming.log.storage import Storage

log = logging.getLogger(__name__)

ROOM_WINDOW = 1024  # records scanned at first for the next roll point
# Objects of the active segment are folded together up to this size (held in memory). Past it, one more read
# of an object costs little beside reading its bytes, and every fold copies each byte again: a large --once
# appends 100k records (about 14 MB) at a time, which a 64 MiB limit folded into 28 and then 56 MB objects.
MERGE_LIMIT = 16 << 20


def room(seg: SegmentMeta, sizes: np.ndarray, i: int, segment_bytes: int) -> int:
    """The index of the first record from i on that must start a new segment because segment.bytes is
    reached; len(sizes) if none. The scan window doubles until it finds the end, so a batch costs
    O(records), not O(records x rolls)."""
    window = ROOM_WINDOW
    while True:
        stop = min(len(sizes), i + window)
        full = seg.size_bytes + np.cumsum(sizes[i:stop]) > segment_bytes
        if not seg.record_count:
            full[0] = False  # an empty segment takes its first record, however large
        if full.any():
            return i + int(np.argmax(full))
        if stop == len(sizes):
            return stop
        window *= 2


def with_object(storage: Storage, directory: str, seg: SegmentMeta, batch: pa.RecordBatch, sizes: np.ndarray,
                lag: np.ndarray) -> SegmentMeta:
    """The segment with the batch written as a new object. Trailing objects no larger than the new
    records are folded into it (their blocks copied, not decoded), as a binary counter carries: a
    segment fed by many small appends keeps O(log n) objects at O(log n) copies per byte."""
    header = object_header(seg)
    body = [object_body(batch, seg.sync_marker)]
    size = len(header) + len(body[0])  # of the object to write
    chunks = list(seg.chunks)
    while chunks and chunks[-1].bytes <= size and size + chunks[-1].bytes <= MERGE_LIMIT:
        blocks = _blocks_of(storage, directory, chunks[-1])
        if blocks is None:
            break
        chunks.pop()
        body.insert(0, blocks)
        size += len(blocks)
    name = object_name(seg.base_offset)
    crc = 0
    with storage.open_put(posixpath.join(objects_dir(directory), name)) as f:
        for part in (header, *body):  # written part by part: joined first, each byte was copied once more
            f.write(part)
            crc = zlib.crc32(part, crc)
    new = dataclasses.replace(seg, chunks=(*chunks, Chunk(name, size, crc)))
    new.observe(batch, sizes, lag)
    return new


def _blocks_of(storage: Storage, directory: str, chunk: Chunk) -> bytes | None:
    """An object's blocks (after its header), checked against the manifest; None when damaged, so
    damage is never copied into a new object with a fresh checksum. None too when it is gone: a writer
    fenced long ago may name an object its successors folded and collected, and its commit is what
    refuses it."""
    try:
        data = storage.get(posixpath.join(objects_dir(directory), chunk.name))
    except FileNotFoundError:
        log.error("%s: object %s is missing; later appends go to new objects", directory, chunk.name)
        return None
    if len(data) != chunk.bytes or zlib.crc32(data) != chunk.crc32:
        log.error("%s: object %s does not match the manifest; later appends go to new objects",
                  directory, chunk.name)
        return None
    _, _, start = read_header(io.BytesIO(data))
    return data[start:]


def write_cleaned(f: BinaryIO, new: SegmentMeta, batches: Iterable[pa.RecordBatch], written_at: int,
                  after_max_ms: int) -> tuple[int, int]:
    """A cleaned segment's one object, its bytes and CRC: records in offset order within the segment, none
    counted as written later than ``written_at`` (the replaced segments' latest time)."""
    header = object_header(new)
    f.write(header)
    written = len(header)
    crc = zlib.crc32(header)
    last = new.base_offset - 1
    keys = FilterBuilder()
    for batch in batches:
        if not batch.num_rows:
            continue
        off = offsets_of(batch)
        if off[0] <= last or off[-1] >= new.next_offset or (len(off) > 1 and (np.diff(off) <= 0).any()):
            raise ValueError(f"replacement records [{off[0]}, {off[-1]}] not in ({last}, {new.next_offset}) "
                             f"or out of order")
        last = int(off[-1])
        data = object_body(batch, new.sync_marker)
        f.write(data)
        written += len(data)
        crc = zlib.crc32(data, crc)
        new.observe(batch, record_sizes(batch), np.minimum(lag_timestamps(batch, written_at, after_max_ms), written_at))
        _fingerprint(keys, batch)
    new.key_filter = keys.build()
    return written, crc


def _fingerprint(keys: FilterBuilder, batch: pa.RecordBatch) -> None:
    """A cleaned segment's keys, for its filter; none where a tombstone has no horizon (kept past the pass's end)."""
    if not keys.wants:
        return
    if (~validity(batch.column("value")) & ~validity(batch.column("delete_horizon_ms"))).any():
        keys.give_up()
        return
    key = batch.column("key")
    keys.add(fingerprints(key.drop_null() if key.null_count else key))
