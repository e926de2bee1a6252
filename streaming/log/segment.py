"""One segment: an Avro container file of records plus a JSON sidecar of what the cleaner needs.

The sidecar lets selection (dirty ratios, lags, horizons) run without reading records. It also records the
file's length and CRC-32, kept up to date on every append: Avro's null codec has no checksum, and a
flipped byte inside a value still decodes. A whole-segment read checks both before decoding, so damaged
bytes are reported, never cleaned or emitted. Only the active segment may legitimately be longer than
its sidecar (a crash after the data write): it is rebuilt from the file, after cutting any torn tail back
to the last whole block. Any other mismatch is damage, and is reported instead of repaired.
"""

from __future__ import annotations

import io
import json
import logging
import os
import time
import zlib
from dataclasses import asdict, dataclass, fields
from typing import BinaryIO, Callable, Iterator

import fastavro
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from fastavro.write import Writer

from streaming.log import codec
from streaming.log.columns import (DecodeError, decode_blocks, decode_key_blocks, encode_batch, iter_records,
                                   lag_timestamps, record_sizes)
from streaming.log.record import LogRecord, parsed_schema
from streaming.log.storage import Storage

log = logging.getLogger(__name__)

SEGMENT_SUFFIX = ".avro"
META_SUFFIX = ".meta.json"
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
SYNC_SIZE = 16
BlockDecoder = Callable[[np.ndarray, int, int, bytes], tuple[pa.RecordBatch, int]]
VERIFY_CHUNK = 1 << 20
READ_CHUNK = 2 << 20

# Avro header metadata: a cleaned segment carries its offset range so a crash mid-swap can be completed
# from the swap file alone.
HDR_BASE = "kcompact.base_offset"
HDR_NEXT = "kcompact.next_offset"
HDR_CLEAN = "kcompact.clean"


def segment_name(base_offset: int) -> str:
    return f"{base_offset:020d}{SEGMENT_SUFFIX}"


def meta_name(base_offset: int) -> str:
    return f"{base_offset:020d}{META_SUFFIX}"


class CorruptSegmentError(RuntimeError):
    """A segment's bytes are not what was written; the message names the file and what is wrong."""


@dataclass
class SegmentMeta:
    base_offset: int
    next_offset: int
    last_offset: int | None = None
    record_count: int = 0
    size_bytes: int = 0
    first_timestamp: int | None = None
    largest_timestamp: int | None = None
    clean: bool = False
    min_delete_horizon_ms: int | None = None
    file_bytes: int = 0
    crc32: int = 0  # of the file's first file_bytes bytes

    @property
    def empty(self) -> bool:
        return self.record_count == 0

    def observe(self, batch: pa.RecordBatch, sizes: np.ndarray, lag_ts: np.ndarray) -> None:
        """Account for records written to this segment, in order (kept in step with the file); ``lag_ts``
        are their lag timestamps (see columns.lag_timestamps), which is what the time fields hold."""
        n = batch.num_rows
        if n == 0:
            return
        if self.first_timestamp is None:
            self.first_timestamp = int(lag_ts[0])
        top = int(lag_ts.max())
        if self.largest_timestamp is None or top > self.largest_timestamp:
            self.largest_timestamp = top
        self.last_offset = batch.column("offset")[n - 1].as_py()
        self.next_offset = max(self.next_offset, self.last_offset + 1)
        self.record_count += n
        self.size_bytes += int(sizes.sum())
        tombstones = batch.column("value").is_null()
        horizons = pc.min(pc.filter(batch.column("delete_horizon_ms"), tombstones)).as_py()
        if horizons is not None and (self.min_delete_horizon_ms is None or horizons < self.min_delete_horizon_ms):
            self.min_delete_horizon_ms = horizons

    def to_json(self) -> bytes:
        return json.dumps(asdict(self), sort_keys=True).encode()

    @classmethod
    def from_json(cls, data: bytes) -> "SegmentMeta":
        """A sidecar; fields this version does not keep (written by an older one) are ignored."""
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in json.loads(data).items() if k in known})


BLOCK_RECORDS = 4096
BLOCK_BYTES = 1 << 16


def container_header(sync_marker: bytes | None = None, metadata: dict[str, str] | None = None) -> bytes:
    """The Avro container header of a new segment file (a fresh random sync marker unless given)."""
    buf = io.BytesIO()
    Writer(buf, parsed_schema(), codec="null", sync_marker=sync_marker or b"", metadata=metadata).flush()
    return buf.getvalue()


def encode_blocks(batch: pa.RecordBatch, sync_marker: bytes) -> bytes:
    """The batch's records as whole Avro blocks, ready to append to a file with this sync marker.

    Encoding in memory keeps every append a single write of whole blocks (so a crash tears at most the
    last write) and works on filesystems that only offer append streams."""
    payload, ends = encode_batch(batch)
    return codec.frame_blocks(payload, ends, np.frombuffer(sync_marker, dtype=np.uint8), BLOCK_RECORDS,
                              BLOCK_BYTES).tobytes()


def read_header(f: BinaryIO) -> tuple[dict[str, bytes], bytes, int]:
    """Avro header metadata, sync marker and the position where blocks start."""
    f.seek(0)
    reader = fastavro.reader(f)
    header = reader._header  # fastavro exposes no public accessor for the raw header
    return header["meta"], header["sync"], f.tell()


def whole_blocks_end(f: BinaryIO, file_size: int) -> int:
    """The file position after the last complete, correctly framed block (blocks are never split)."""
    _, sync, good = read_header(f)
    marker = np.frombuffer(sync, dtype=np.uint8)
    window = READ_CHUNK
    while good < file_size:
        f.seek(good)
        data = np.frombuffer(f.read(window), dtype=np.uint8)
        end = codec.framed_end(data, 0, len(data), marker)
        if end == 0:
            if good + len(data) >= file_size:
                break  # what is left holds no whole block: a torn tail
            window *= 2  # a block larger than the window
            continue
        good += end
    return good


def rebuild_meta(storage: Storage, path: str, base_offset: int, timestamp_after_max_ms: int) -> tuple[SegmentMeta, int]:
    """Recompute a segment's metadata from its records; cut a torn tail. Returns (meta, bytes cut).

    Append times are not in the file: out-of-range timestamps count as written now, at the rebuild."""
    size = storage.size(path)
    try:
        with storage.open_read(path) as f:
            good = whole_blocks_end(f, size)
            meta_hdr, _, _ = read_header(f)
    except Exception as exc:  # unreadable header: nothing in the file can be trusted
        raise CorruptSegmentError(f"{path}: unreadable Avro header ({exc})") from exc
    cut = size - good
    if cut:
        storage.truncate(path, good)
    base = int(meta_hdr.get(HDR_BASE, str(base_offset).encode()))
    if base != base_offset:
        raise CorruptSegmentError(f"{path}: header says base offset {base}, file name says {base_offset}")
    meta = SegmentMeta(base_offset=base_offset, next_offset=int(meta_hdr.get(HDR_NEXT, str(base).encode())),
                       clean=meta_hdr.get(HDR_CLEAN) == b"1")
    now_ms = int(time.time() * 1000)
    try:
        for batch in read_batches(storage, path):
            meta.observe(batch, record_sizes(batch), lag_timestamps(batch, now_ms, timestamp_after_max_ms))
    except Exception as exc:
        raise CorruptSegmentError(f"{path}: a whole block does not decode ({exc})") from exc
    meta.file_bytes = good
    meta.crc32 = file_crc32(storage, path, good)
    return meta, cut


def size_damage(meta: SegmentMeta, size: int, last: bool) -> str | None:
    """What is wrong when a segment file's size disagrees with its sidecar, or None when it may be trusted
    or rebuilt: only the active (last) segment can legitimately have grown past its sidecar."""
    if size == meta.file_bytes or (last and size > meta.file_bytes):
        return None
    return f"file has {size} bytes, its sidecar records {meta.file_bytes}"


def damaged_segments(storage: Storage, directory: str, metas: list[SegmentMeta]) -> dict[str, str]:
    """Size damage of a log directory from sidecars and file sizes alone (no reading, no repair)."""
    out = {}
    for i, meta in enumerate(metas):
        name = segment_name(meta.base_offset)
        path = os.path.join(directory, name)
        size = storage.size(path) if storage.exists(path) else 0
        what = size_damage(meta, size, last=i == len(metas) - 1)
        if what:
            out[name] = what
    return out


def file_crc32(storage: Storage, path: str, length: int) -> int:
    """CRC-32 of the first length bytes; raises CorruptSegmentError when the file is shorter."""
    crc = 0
    done = 0
    with storage.open_read(path) as f:
        while done < length:
            chunk = f.read(min(VERIFY_CHUNK, length - done))
            if not chunk:
                raise CorruptSegmentError(f"{path}: truncated: {done} bytes, its sidecar records {length}")
            crc = zlib.crc32(chunk, crc)
            done += len(chunk)
    return crc


def _mismatch(path: str, crc: int, length: int, meta: SegmentMeta) -> CorruptSegmentError:
    return CorruptSegmentError(f"{path}: checksum mismatch: CRC-32 {crc:08x} over {length} bytes, "
                               f"its sidecar records {meta.crc32:08x} over {meta.file_bytes}")


def verify_segment(storage: Storage, path: str, meta: SegmentMeta) -> None:
    """The file still holds the bytes its sidecar describes (length and CRC-32)."""
    crc = file_crc32(storage, path, meta.file_bytes)
    if crc != meta.crc32:
        raise _mismatch(path, crc, meta.file_bytes, meta)


def read_batches(storage: Storage, path: str, decode: BlockDecoder = decode_blocks,
                 checked_against: SegmentMeta | None = None) -> Iterator[pa.RecordBatch]:
    """The file's records, a batch per READ_CHUNK of blocks (memory stays flat whatever the segment size).

    With ``checked_against``, the bytes are checked against that sidecar as they are read, and damage
    raises CorruptSegmentError only after the last batch: for a reader that acts on nothing before the
    end (the cleaner's map), this saves reading the file twice."""
    with storage.open_read(path) as f:
        _, sync, pos = read_header(f)
        f.seek(0)
        head = f.read(pos)
        crc, length = zlib.crc32(head), len(head)
        pending = b""
        while True:
            chunk = f.read(READ_CHUNK)
            if checked_against is not None:
                crc, length = zlib.crc32(chunk, crc), length + len(chunk)
            data = pending + chunk if pending else chunk
            if not data:
                break
            buf = np.frombuffer(data, dtype=np.uint8)
            batch, used = decode(buf, 0, len(buf), sync)
            if batch.num_rows:
                yield batch
            pending = data[used:]
            if not chunk:
                if pending:
                    raise DecodeError(codec.ERR_TRUNCATED, pos)
                break
            pos += used
    if checked_against is not None and (crc, length) != (checked_against.crc32, checked_against.file_bytes):
        raise _mismatch(path, crc, length, checked_against)


def iter_file(storage: Storage, path: str) -> Iterator[LogRecord]:
    return iter_records(read_batches(storage, path))


def read_verified(storage: Storage, path: str, meta: SegmentMeta) -> Iterator[pa.RecordBatch]:
    """The segment's records, after checking its bytes; a decoding failure is reported as damage too."""
    verify_segment(storage, path, meta)
    yield from _decoding_as_damage(path, read_batches(storage, path))


def read_keys_checked(storage: Storage, path: str, meta: SegmentMeta) -> Iterator[pa.RecordBatch]:
    """The segment's key columns (KEY_BATCH_SCHEMA), its bytes checked as they are read (see read_batches)."""
    return _decoding_as_damage(path, read_batches(storage, path, decode_key_blocks, checked_against=meta))


def _decoding_as_damage(path: str, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    try:
        yield from batches
    except (ValueError, EOFError, TypeError, IndexError, UnicodeDecodeError) as exc:
        raise CorruptSegmentError(f"{path}: does not decode ({type(exc).__name__}: {exc})") from exc


def read_segment_metas(storage: Storage, directory: str) -> list[SegmentMeta]:
    """The sidecars of a log directory, without opening (and so without recovering) the log.

    For readers beside a running job (status, dump): they must never write, and a sidecar is at worst
    one append behind its segment.
    """
    metas = [SegmentMeta.from_json(storage.read(os.path.join(directory, name)))
             for name in storage.listdir(directory) if name.endswith(META_SUFFIX)]
    return sorted(metas, key=lambda m: m.base_offset)
