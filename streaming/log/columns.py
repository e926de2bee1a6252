"""Records as columns: the form the log appends, reads and cleans in.

A batch is an Arrow record batch of LOG_BATCH_SCHEMA, one row per record. Arrow because the data arrives
from Spark as Arrow and the cleaner works on whole columns (numpy views, filters, takes in C++); records
become Python dicts only at the edges (tests, dump, emission). Headers are kept in their Avro encoding
(see codec), since only the header strategy and emission look inside them.
"""

from __future__ import annotations

from typing import Iterable, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from streaming.log import codec
from streaming.log.record import Header, LogRecord

LOG_BATCH_SCHEMA = pa.schema([
    pa.field("offset", pa.int64(), nullable=False),
    pa.field("timestamp", pa.int64(), nullable=False),
    pa.field("timestamp_type", pa.int32(), nullable=False),
    pa.field("key", pa.binary()),
    pa.field("value", pa.binary()),
    pa.field("headers", pa.binary(), nullable=False),
    pa.field("delete_horizon_ms", pa.int64()),
])
# What the cleaner's map phase reads: no values (most of a segment's bytes), each record's size and whether it is a
# tombstone instead.
KEY_BATCH_SCHEMA = pa.schema([
    pa.field("offset", pa.int64(), nullable=False),
    pa.field("timestamp", pa.int64(), nullable=False),
    pa.field("key", pa.binary()),
    pa.field("headers", pa.binary(), nullable=False),
    pa.field("size", pa.int64(), nullable=False),
    pa.field("tombstone", pa.bool_(), nullable=False),
])
NO_HEADERS = b"\x00"  # the Avro encoding of an empty array
# Roughly what Avro spends per record beyond key, value and headers (varints, union tags). Sizes drive
# segment.bytes rolls and dirty ratios, so they must be cheap, not exact.
RECORD_OVERHEAD = 24


# ----- headers in their Avro encoding ----------------------------------------------------------------------

def _varint(v: int) -> bytes:
    z = (v << 1) ^ (v >> 63)
    out = bytearray()
    while z >= 0x80:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


def _read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    z = shift = 0
    while True:
        b = buf[pos]
        pos += 1
        z |= (b & 0x7F) << shift
        if b < 0x80:
            return (z >> 1) ^ -(z & 1), pos
        shift += 7


def encode_headers(headers: Sequence[Header] | Sequence[tuple[str, bytes | None]]) -> bytes:
    """Headers as dicts ({"key", "value"}) or Kafka-style (key, value) pairs -> their Avro encoding."""
    if not headers:
        return NO_HEADERS
    parts = [_varint(len(headers))]
    for h in headers:
        k, v = (h["key"], h["value"]) if isinstance(h, dict) else h
        kb = k.encode("utf-8")
        parts.append(_varint(len(kb)) + kb)
        parts.append(b"\x00" if v is None else b"\x02" + _varint(len(v)) + bytes(v))
    parts.append(b"\x00")
    return b"".join(parts)


def decode_headers(data: bytes) -> list[Header]:
    return [{"key": k, "value": v} for k, v in header_pairs(data)]


def header_pairs(data: bytes) -> list[tuple[str, bytes | None]]:
    """Headers as Kafka clients take them: (key, value) pairs. A header's lengths almost always fit one
    varint byte, read inline; a longer one takes _read_varint."""
    if data == NO_HEADERS:
        return []
    out: list[tuple[str, bytes | None]] = []
    pos = 0
    while True:
        count, pos = _read_varint(data, pos)
        if count == 0:
            return out
        if count < 0:
            count = -count
            _, pos = _read_varint(data, pos)
        for _ in range(count):
            b = data[pos]
            if b < 0x80:
                n, pos = b >> 1, pos + 1
            else:
                n, pos = _read_varint(data, pos)
            key = data[pos:pos + n].decode("utf-8")
            pos += n
            if data[pos] == 0:  # the union's null
                out.append((key, None))
                pos += 1
                continue
            b = data[pos + 1]
            if b < 0x80:
                n, pos = b >> 1, pos + 2
            else:
                n, pos = _read_varint(data, pos + 1)
            out.append((key, data[pos:pos + n]))
            pos += n


# ----- conversions ------------------------------------------------------------------------------------------

def batch_from_records(records: Sequence[LogRecord]) -> pa.RecordBatch:
    """Dicts -> a batch. Raises (TypeError, ValueError, KeyError, OverflowError, pa.ArrowException) on a
    record that does not fit the schema; the caller finds and names the one at fault."""
    return pa.RecordBatch.from_arrays([
        pa.array([r["offset"] for r in records], pa.int64()),
        pa.array([r["timestamp"] for r in records], pa.int64()),
        pa.array([r["timestamp_type"] for r in records], pa.int32()),
        pa.array([r["key"] for r in records], pa.binary()),
        pa.array([r["value"] for r in records], pa.binary()),
        pa.array([encode_headers(r["headers"]) for r in records], pa.binary()),
        pa.array([r.get("delete_horizon_ms") for r in records], pa.int64()),
    ], schema=LOG_BATCH_SCHEMA)


def records_from_batch(batch: pa.RecordBatch) -> list[LogRecord]:
    cols = [batch.column(i).to_pylist() for i in range(batch.num_columns)]
    return [{"offset": o, "timestamp": t, "timestamp_type": tt, "key": k, "value": v,
             "headers": [] if h == NO_HEADERS else decode_headers(h), "delete_horizon_ms": d}
            for o, t, tt, k, v, h, d in zip(*cols, strict=True)]


def header_lists(encoded: pa.Array) -> list[list[tuple[str, bytes | None]]]:
    """Each record's headers as pairs, decoded once per distinct encoding in the batch: headers that repeat
    from record to record (a type id, a content type, a source tag) cost a dict lookup each, not a walk of
    their bytes in Python."""
    decoded: dict[bytes, list[tuple[str, bytes | None]]] = {}
    return [decoded[h] if h in decoded else decoded.setdefault(h, header_pairs(h)) for h in encoded.to_pylist()]


def iter_records(batches: Iterable[pa.RecordBatch]) -> Iterable[LogRecord]:
    for b in batches:
        yield from records_from_batch(b)


# ----- numpy views for the kernels ------------------------------------------------------------------------

def _zero_for_null(arr: pa.Array) -> pa.Array:
    """The array with 0 where it holds null (fill_null copies the array even when there is none)."""
    return arr.fill_null(0) if arr.null_count else arr


def _ints(arr: pa.Array, dtype) -> np.ndarray:
    return _zero_for_null(arr).to_numpy(zero_copy_only=False).astype(dtype, copy=False)


def offsets_of(batch: pa.RecordBatch) -> np.ndarray:
    return batch.column("offset").to_numpy(zero_copy_only=False)


def validity(arr: pa.Array) -> np.ndarray:
    """True where the array holds a value (not null), as a numpy mask."""
    if arr.null_count == 0:
        return np.ones(len(arr), dtype=bool)
    return arr.is_valid().to_numpy(zero_copy_only=False)


def binary_parts(arr: pa.Array) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(offsets as int64, n + 1 of them; data bytes; validity) of a binary or large_binary array."""
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    _, off_buf, data_buf = arr.buffers()
    dtype = np.int64 if pa.types.is_large_binary(arr.type) else np.int32
    n = len(arr)
    if off_buf is None:
        offsets = np.zeros(n + 1, dtype=np.int64)
    else:
        offsets = np.frombuffer(off_buf, dtype=dtype)[arr.offset: arr.offset + n + 1].astype(np.int64)
    data = np.frombuffer(data_buf, dtype=np.uint8) if data_buf is not None else np.zeros(0, dtype=np.uint8)
    return offsets, data, validity(arr)


def record_sizes(batch: pa.RecordBatch) -> np.ndarray:
    """What each record counts for in segment sizes: key, value and encoded headers plus a fixed overhead."""
    def lengths(name: str) -> np.ndarray:
        return _zero_for_null(pc.binary_length(batch.column(name))).to_numpy(zero_copy_only=False).astype(np.int64)
    return RECORD_OVERHEAD + lengths("key") + lengths("value") + lengths("headers") - 1


def record_size(r: LogRecord) -> int:
    return int(record_sizes(batch_from_records([r]))[0])


def lag_timestamps(batch: pa.RecordBatch, append_ms: int, after_max_ms: int) -> np.ndarray:
    """The time each record counts as written, for the roll and lag clocks (segment.ms, min/max lag).

    A record keeps its own timestamp (it is emitted unchanged), but a negative one (Kafka's NO_TIMESTAMP
    is -1) says nothing, and one more than message.timestamp.after.max.ms ahead of the append would hold
    its segment back from rolling and cleaning until that future time, and with it every key after it.
    Both count as written when they were appended.
    """
    ts = batch.column("timestamp").to_numpy(zero_copy_only=False)
    return np.where((ts >= 0) & (ts <= append_ms + after_max_ms), ts, append_ms)


def encode_batch(batch: pa.RecordBatch, sync: bytes, max_records: int, max_bytes: int) -> np.ndarray:
    """The batch's records in Avro binary encoding, as whole blocks of at most ``max_records`` records and
    ``max_bytes`` bytes (a record larger than that is a block of its own), each followed by ``sync``."""
    if batch.num_rows == 0:
        return np.zeros(0, dtype=np.uint8)
    key_off, key_data, key_valid = binary_parts(batch.column("key"))
    val_off, val_data, val_valid = binary_parts(batch.column("value"))
    hdr_off, hdr_data, _ = binary_parts(batch.column("headers"))
    horizon = batch.column("delete_horizon_ms")
    return codec.encode_blocks(_ints(batch.column("offset"), np.int64), _ints(batch.column("timestamp"), np.int64),
                               _ints(batch.column("timestamp_type"), np.int64), key_off, key_data, key_valid,
                               val_off, val_data, val_valid, hdr_off, hdr_data, _ints(horizon, np.int64),
                               validity(horizon), np.frombuffer(sync, dtype=np.uint8), max_records, max_bytes)


def _binary_array(buf: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> pa.Array:
    offsets, data = codec.gather_binary(buf, starts, lengths)
    valid = lengths >= 0
    n = len(starts)
    validity = None if valid.all() else pa.py_buffer(np.packbits(valid, bitorder="little"))
    return pa.Array.from_buffers(pa.binary(), n, [validity, pa.py_buffer(offsets), pa.py_buffer(data)],
                                 null_count=int(n - valid.sum()))


class DecodeError(ValueError):
    def __init__(self, code: int, position: int) -> None:
        what = {codec.ERR_FRAMING: "a block's records do not end at its stated size",
                codec.ERR_SYNC: "a block is not followed by the file's sync marker",
                codec.ERR_TRUNCATED: "a record runs past the end of its block"}.get(code, f"error {code}")
        super().__init__(f"{what} (block at byte {position})")
        self.position = position


def _decoded(buf: np.ndarray, pos: int, end: int, sync: bytes, max_records: int) -> tuple:
    out = codec.decode_blocks(buf, pos, end, np.frombuffer(sync, dtype=np.uint8), max_records)
    if out[2] != codec.OK:
        raise DecodeError(out[2], out[1])
    return out


def decode_batch(buf: np.ndarray, pos: int, end: int, sync: bytes,
                  max_records: int = 1 << 62) -> tuple[pa.RecordBatch, int]:
    """Whole blocks in buf[pos:end] (about ``max_records`` records at most) -> (batch, position after them)."""
    (n, after, _, offset, timestamp, ttype, key_start, key_len, val_start, val_len, hdr_start, hdr_len, horizon,
     horizon_valid) = _decoded(buf, pos, end, sync, max_records)
    validity = None if horizon_valid.all() else pa.py_buffer(np.packbits(horizon_valid, bitorder="little"))
    batch = pa.RecordBatch.from_arrays([
        pa.array(offset), pa.array(timestamp), pa.array(ttype),
        _binary_array(buf, key_start, key_len), _binary_array(buf, val_start, val_len),
        _binary_array(buf, hdr_start, hdr_len),
        pa.Array.from_buffers(pa.int64(), int(n), [validity, pa.py_buffer(horizon)],
                              null_count=int(n - horizon_valid.sum())),
    ], schema=LOG_BATCH_SCHEMA)
    return batch, int(after)


def decode_key_batch(buf: np.ndarray, pos: int, end: int, sync: bytes,
                      max_records: int = 1 << 62) -> tuple[pa.RecordBatch, int]:
    """decode_batch projected to KEY_BATCH_SCHEMA: values are skipped, never copied out of the buffer."""
    (_, after, _, offset, timestamp, _, key_start, key_len, _, val_len, hdr_start, hdr_len, _,
     _) = _decoded(buf, pos, end, sync, max_records)
    sizes = RECORD_OVERHEAD + np.maximum(key_len, 0) + np.maximum(val_len, 0) + hdr_len - 1
    batch = pa.RecordBatch.from_arrays([
        pa.array(offset), pa.array(timestamp), _binary_array(buf, key_start, key_len),
        _binary_array(buf, hdr_start, hdr_len), pa.array(sizes), pa.array(val_len < 0),
    ], schema=KEY_BATCH_SCHEMA)
    return batch, int(after)
