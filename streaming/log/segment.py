"""One segment: a run of offsets held in one or more Avro container objects, described in the manifest.

A segment's description (SegmentMeta) lets selection (dirty ratios, lags, horizons) run without reading
records. It also records each object's length and CRC-32: Avro's null codec has no checksum, and a
flipped byte inside a value still decodes. A whole-segment read checks both before decoding, so damaged
bytes are reported, never cleaned or emitted.

The active segment grows by one object per append (object stores cannot append); objects of one segment
share its sync marker, so consecutive ones merge by concatenating their blocks, without decoding.
"""

from __future__ import annotations

import io
import logging
import os
import uuid
import zlib
from dataclasses import dataclass, fields
from typing import BinaryIO, Callable, Iterator

import fastavro
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from fastavro.write import Writer

from streaming.log import codec
from streaming.log.columns import DecodeError, decode_batch, decode_key_batch, encode_batch
from streaming.log.record import parsed_schema
from streaming.log.storage import Storage

log = logging.getLogger(__name__)

OBJECT_SUFFIX = ".avro"
SYNC_SIZE = 16
BlockDecoder = Callable[[np.ndarray, int, int, bytes], tuple[pa.RecordBatch, int]]
VERIFY_CHUNK = 1 << 20
READ_CHUNK = 2 << 20

# Avro header metadata, so an object read alone (by any Avro tool) says which segment it belongs to.
HDR_BASE = "kcompact.base_offset"


def segment_name(base_offset: int) -> str:
    """How messages and reports name a segment: its base offset, as Kafka names segment files."""
    return f"{base_offset:020d}"


def object_name(first_offset: int) -> str:
    """A new, unique object name: written once, never overwritten, so no reader sees it change."""
    return f"{first_offset:020d}-{uuid.uuid4().hex[:16]}{OBJECT_SUFFIX}"


class CorruptSegmentError(RuntimeError):
    """A segment's bytes are not what was written; the message names the file and what is wrong."""


@dataclass(frozen=True)
class Chunk:
    """One immutable object of a segment."""

    name: str
    bytes: int
    crc32: int


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
    sync: str = ""  # the Avro sync marker (hex) every object of the segment uses
    chunks: tuple[Chunk, ...] = ()
    key_filter: str | None = None  # its keys (streaming.log.key_filter), where a writer or a pass knew them all

    @property
    def empty(self) -> bool:
        return self.record_count == 0

    @property
    def sync_marker(self) -> bytes:
        return bytes.fromhex(self.sync)

    @classmethod
    def new(cls, base_offset: int, next_offset: int | None = None, clean: bool = False) -> "SegmentMeta":
        """A segment with no objects yet, and a fresh random sync marker for the ones it will have."""
        return cls(base_offset, base_offset if next_offset is None else next_offset, clean=clean,
                   sync=os.urandom(SYNC_SIZE).hex())

    def observe(self, batch: pa.RecordBatch, sizes: np.ndarray, lag_ts: np.ndarray) -> None:
        """Account for records written to this segment, in order (kept in step with the file); ``lag_ts``
        are their lag timestamps (see columns.lag_timestamps), which is what the time fields hold."""
        n = batch.num_rows
        if n == 0:
            return
        self.key_filter = None  # it no longer holds every key: a writer that knows them sets it again
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

    def to_dict(self) -> dict:
        # field by field, not asdict, which deep-copies each value: a log writes a manifest or two a stage
        doc = {f.name: getattr(self, f.name) for f in _SEGMENT_FIELDS}
        doc["chunks"] = [{f.name: getattr(c, f.name) for f in _CHUNK_FIELDS} for c in self.chunks]
        return doc

    @classmethod
    def from_dict(cls, doc: dict) -> "SegmentMeta":
        """Fields this version does not keep (written by an older one) are ignored."""
        known = {f.name for f in fields(cls)}
        meta = cls(**{k: v for k, v in doc.items() if k in known and k != "chunks"})
        meta.chunks = tuple(Chunk(**c) for c in doc.get("chunks", ()))
        return meta


_SEGMENT_FIELDS, _CHUNK_FIELDS = fields(SegmentMeta), fields(Chunk)


BLOCK_RECORDS = 4096
BLOCK_BYTES = 1 << 16


def container_header(sync_marker: bytes | None = None, metadata: dict[str, str] | None = None) -> bytes:
    """The Avro container header of a new object (a fresh random sync marker unless given)."""
    buf = io.BytesIO()
    Writer(buf, parsed_schema(), codec="null", sync_marker=sync_marker or b"", metadata=metadata).flush()
    return buf.getvalue()


def object_header(seg: SegmentMeta) -> bytes:
    """The header every object of the segment starts with: the segment's sync marker and base offset."""
    return container_header(seg.sync_marker, {HDR_BASE: str(seg.base_offset)})


def object_body(batch: pa.RecordBatch, sync_marker: bytes) -> memoryview:
    """The batch's records as whole Avro blocks, for an object with this sync marker. A view of the encoder's
    buffer, not a copy: a writer joins it with the header or writes it as it is."""
    return memoryview(encode_batch(batch, sync_marker, BLOCK_RECORDS, BLOCK_BYTES))


def read_header(f: BinaryIO) -> tuple[dict[str, bytes], bytes, int]:
    """Avro header metadata, sync marker and the position where blocks start."""
    f.seek(0)
    reader = fastavro.reader(f)
    header = reader._header  # noqa: SLF001 (fastavro exposes no public accessor for the raw header)
    return header["meta"], header["sync"], f.tell()


def object_crc32(storage: Storage, path: str, length: int) -> int:
    """CRC-32 of the first length bytes; raises CorruptSegmentError when the object is shorter."""
    crc = 0
    done = 0
    with storage.open_read(path) as f:
        while done < length:
            data = f.read(min(VERIFY_CHUNK, length - done))
            if not data:
                raise _truncated(path, done, length)
            crc = zlib.crc32(data, crc)
            done += len(data)
    return crc


def _truncated(path: str, held: int, length: int) -> CorruptSegmentError:
    return CorruptSegmentError(f"{path}: truncated: {held} bytes, the manifest records {length}")


def _mismatch(path: str, crc: int, length: int, chunk: Chunk) -> CorruptSegmentError:
    return CorruptSegmentError(f"{path}: checksum mismatch: CRC-32 {crc:08x} over {length} bytes, "
                               f"the manifest records {chunk.crc32:08x} over {chunk.bytes}")


def verify_object(storage: Storage, path: str, chunk: Chunk, data: bytes | None = None) -> None:
    """The object still holds the bytes the manifest describes (length and CRC-32); ``data``: its bytes, read."""
    if data is not None and len(data) < chunk.bytes:
        raise _truncated(path, len(data), chunk.bytes)
    crc = object_crc32(storage, path, chunk.bytes) if data is None else zlib.crc32(memoryview(data)[:chunk.bytes])
    if crc != chunk.crc32:
        raise _mismatch(path, crc, chunk.bytes, chunk)


def _fill(f: BinaryIO, buf: np.ndarray, start: int) -> int:
    """Read into buf[start:] until it is full or the object ends; returns the end of what buf holds."""
    view = memoryview(buf)
    while start < len(buf):
        got = f.readinto(view[start:])
        if not got:
            break
        start += got
    return start


def read_batches(storage: Storage, path: str, decode: BlockDecoder = decode_batch,
                 checked_against: Chunk | None = None) -> Iterator[pa.RecordBatch]:
    """The object's records, a batch per READ_CHUNK of blocks (memory stays flat whatever its size).

    One buffer is read into and reused: what a batch holds is copied out of it by the decoder, and the
    part of a block cut off at the buffer's end moves to its front before the next read (a block larger
    than the buffer doubles it).

    With ``checked_against``, the bytes are checked against the manifest as they are read, and damage
    raises CorruptSegmentError only after the last batch: for a reader that acts on nothing before the
    end (the cleaner's map), this saves reading the object twice."""
    with storage.open_read(path) as f:
        yield from _batches(f, path, decode, checked_against)


def _batches(f: BinaryIO, path: str, decode: BlockDecoder, checked_against: Chunk | None) -> Iterator[pa.RecordBatch]:
    """read_batches from an open object."""
    checking = checked_against is not None
    buf = np.empty(READ_CHUNK, dtype=np.uint8)
    held = _fill(f, buf, 0)  # read front to back, never seeking: one streamed download on a store
    _, sync, pos = read_header(io.BytesIO(buf[:held].tobytes()))
    crc, length = (zlib.crc32(buf[:held]), held) if checking else (0, 0)
    start = 0  # the object's position of buf[0]
    while True:
        ended = held < len(buf)
        batch, pos = decode(buf, pos, held, sync)
        if batch.num_rows:
            yield batch
        if ended:
            if pos < held:
                raise DecodeError(codec.ERR_TRUNCATED, start + pos)
            break
        tail = held - pos
        if tail == len(buf):  # not one whole block in a full buffer
            buf = np.concatenate([buf, np.empty(len(buf), dtype=np.uint8)])
        else:
            buf[:tail] = buf[pos:held]
            start += pos
        pos, before = 0, tail
        held = _fill(f, buf, tail)
        if checking:
            crc, length = zlib.crc32(buf[before:held], crc), length + held - before
    if checking and (crc, length) != (checked_against.crc32, checked_against.bytes):
        raise _mismatch(path, crc, length, checked_against)


def read_verified(storage: Storage, path: str, chunk: Chunk) -> Iterator[pa.RecordBatch]:
    """The object's records, after checking its bytes; a decoding failure is reported as damage too. An object
    that fits the read buffer is read once, checked in memory and decoded from there; a larger one is read twice,
    checked first, so no batch of damaged bytes reaches a caller that acts as it reads (the emission)."""
    if not fits_buffer(chunk):
        verify_object(storage, path, chunk)
        yield from _decoding_as_damage(path, read_batches(storage, path))
        return
    yield from decode_object(path, fetch_verified(storage, path, chunk))


def fits_buffer(chunk: Chunk) -> bool:
    """The object is read whole into memory, not in pieces."""
    return chunk.bytes <= READ_CHUNK


def fetch_verified(storage: Storage, path: str, chunk: Chunk) -> bytes:
    """The bytes of an object that fits the read buffer, checked against what the manifest records."""
    data = storage.get(path)
    verify_object(storage, path, chunk, data)
    return data


def decode_object(path: str, data: bytes, decode: BlockDecoder = decode_batch) -> Iterator[pa.RecordBatch]:
    """An object's records from its bytes, read and checked already; a decoding failure is reported as damage."""
    return _decoding_as_damage(path, _batches(io.BytesIO(data), path, decode, None))


def read_keys_checked(storage: Storage, path: str, chunk: Chunk) -> Iterator[pa.RecordBatch]:
    """The object's key columns (KEY_BATCH_SCHEMA), its bytes checked as they are read (see read_batches)."""
    return _decoding_as_damage(path, read_batches(storage, path, decode_key_batch, checked_against=chunk))


def _decoding_as_damage(path: str, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    try:
        yield from batches
    except (ValueError, EOFError, TypeError, IndexError, UnicodeDecodeError) as exc:
        raise CorruptSegmentError(f"{path}: does not decode ({type(exc).__name__}: {exc})") from exc


def object_damage(segments: list[SegmentMeta], listed: dict[str, int]) -> dict[str, str]:
    """What is wrong with each segment whose objects are missing or of another length than the manifest
    records, from a listing alone (name -> size): found without reading, never repaired."""
    out = {}
    for seg in segments:
        for c in seg.chunks:
            size = listed.get(c.name)
            if size != c.bytes:
                out[segment_name(seg.base_offset)] = (f"object {c.name} is missing" if size is None else
                                                      f"object {c.name} has {size} bytes, the manifest records {c.bytes}")
                break
    return out
