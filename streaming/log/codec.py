"""Avro binary encoding of the log schema (streaming/log/log_record.avsc), compiled, a whole batch per call.

fastavro encodes and decodes one record per Python call, which was most of the pipeline's CPU (figures
in bench/README.md). The schema is fixed, so these kernels write and parse its exact bytes in compiled
loops over columns (numba), and records never become Python objects on the append and clean paths.
The bytes are the ones fastavro writes for the same records (tests/log/test_codec.py holds them to it),
so segment files stay plain Avro container files that any Avro reader opens.

Field order: offset long, timestamp long, timestamp_type int, key [null, bytes], value [null, bytes],
headers array<{key string, value [null, bytes]}>, delete_horizon_ms [null, long]. A record's headers
travel as their own Avro encoding (the array, terminator included), so only code that needs them
(header strategy, emission) decodes them.
"""

from __future__ import annotations

import numpy as np
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

OK = 0
ERR_FRAMING = 1   # a block's records do not end where its byte count says
ERR_SYNC = 2      # the 16 bytes after a block are not the file's sync marker
ERR_TRUNCATED = 3  # a field runs past the end of its block

# The helpers called for every field of every record are inlined into the kernels (inline="always"), and work
# on int64 only, shifting right with a mask where Avro's zig-zag needs a logical shift: numba turns arithmetic
# that mixes uint64 and int64 into float64, and calls of their own cost the decoder too (bench/README.md).
_LOW7 = 0x7F
_HIGH = ~0x7F  # the bits above a varint byte's seven
_LOGICAL_1 = 0x7FFFFFFFFFFFFFFF  # masks of an arithmetic right shift by 1 and by 7 that make it logical
_LOGICAL_7 = 0x01FFFFFFFFFFFFFF


@intrinsic
def _copy(typingctx, dst, dst_pos, src, src_pos, n):
    """dst[dst_pos:dst_pos + n] = src[src_pos:src_pos + n] as one memcpy, for byte arrays whose bounds the
    caller has checked: numba compiles a slice assignment to a loop of single bytes, which was most of the
    encoder's time for 100-byte values (bench/README.md)."""
    def codegen(context, builder, signature, args):
        dst_arr, dpos, src_arr, spos, count = args
        d = context.make_array(signature.args[0])(context, builder, dst_arr)
        s = context.make_array(signature.args[2])(context, builder, src_arr)
        cgutils.raw_memcpy(builder, builder.gep(d.data, [dpos]), builder.gep(s.data, [spos]), count, 1)
        return context.get_dummy_value()
    return types.void(dst, dst_pos, src, src_pos, n), codegen


@njit(inline="always")
def _long_size(v):
    z = (v << 1) ^ (v >> 63)
    n = 1
    while z & _HIGH:
        z = (z >> 7) & _LOGICAL_7
        n += 1
    return n


@njit(inline="always")
def _put_long(out, pos, v):
    z = (v << 1) ^ (v >> 63)
    while z & _HIGH:
        out[pos] = (z & _LOW7) | 0x80
        z = (z >> 7) & _LOGICAL_7
        pos += 1
    out[pos] = z
    return pos + 1


@njit(inline="always")
def _get_long(buf, pos, end):
    """(value, next position); next position -1 when the varint runs past ``end``."""
    z = 0
    shift = 0
    while pos < end:
        b = np.int64(buf[pos])
        pos += 1
        z |= (b & _LOW7) << shift
        if b < 0x80:
            return ((z >> 1) & _LOGICAL_1) ^ -(z & 1), pos
        shift += 7
        if shift > 63:
            return 0, -1
    return 0, -1


@njit(inline="always")
def _put_bytes_union(out, pos, valid, offsets, data, i):
    if not valid[i]:
        out[pos] = 0
        return pos + 1
    out[pos] = 2
    a, b = offsets[i], offsets[i + 1]
    pos = _put_long(out, pos + 1, b - a)
    _copy(out, pos, data, a, b - a)
    return pos + b - a


@njit(cache=True, nogil=True)
def _record_ends(offset, timestamp, timestamp_type, key_off, key_valid, val_off, val_valid, hdr_off, horizon,
                 horizon_valid):
    """Where each record's encoding ends, were the records written back to back."""
    n = offset.shape[0]
    ends = np.empty(n, dtype=np.int64)
    total = 0
    for i in range(n):
        s = _long_size(offset[i]) + _long_size(timestamp[i]) + _long_size(np.int64(timestamp_type[i])) + 3
        if key_valid[i]:
            k = key_off[i + 1] - key_off[i]
            s += _long_size(k) + k
        if val_valid[i]:
            v = val_off[i + 1] - val_off[i]
            s += _long_size(v) + v
        h = hdr_off[i + 1] - hdr_off[i]
        s += h if h > 0 else 1
        if horizon_valid[i]:
            s += _long_size(horizon[i])
        total += s
        ends[i] = total
    return ends


@njit(cache=True, nogil=True)
def _block_bounds(ends, max_records, max_bytes):
    """The first record of each block and, last, the record count: at most max_records records and max_bytes
    bytes a block, but never an empty one."""
    n = ends.shape[0]
    bounds = np.empty(n + 1, dtype=np.int64)
    blocks = 0
    i = 0
    while i < n:
        bounds[blocks] = i
        blocks += 1
        start = ends[i - 1] if i else 0
        j = i + 1
        while j < n and j - i < max_records and ends[j] - start <= max_bytes:
            j += 1
        i = j
    bounds[blocks] = n
    return bounds[:blocks + 1]


@njit(cache=True, nogil=True)
def encode_blocks(offset, timestamp, timestamp_type, key_off, key_data, key_valid, val_off, val_data, val_valid,
                  hdr_off, hdr_data, horizon, horizon_valid, sync, max_records, max_bytes):
    """A batch's records as whole Avro blocks (count, byte size, records, sync marker), each record written
    once, straight into its block: the buffer is sized from the records' ends before anything is written."""
    ends = _record_ends(offset, timestamp, timestamp_type, key_off, key_valid, val_off, val_valid, hdr_off, horizon,
                        horizon_valid)
    bounds = _block_bounds(ends, max_records, max_bytes)
    n = ends.shape[0]
    out = np.empty((ends[n - 1] if n else 0) + (bounds.shape[0] - 1) * 36, dtype=np.uint8)  # varints <= 10 bytes, sync
    pos = 0
    for k in range(bounds.shape[0] - 1):
        i, j = bounds[k], bounds[k + 1]
        start = ends[i - 1] if i else 0
        pos = _put_long(out, pos, j - i)
        pos = _put_long(out, pos, ends[j - 1] - start)
        for r in range(i, j):
            pos = _put_long(out, pos, offset[r])
            pos = _put_long(out, pos, timestamp[r])
            pos = _put_long(out, pos, np.int64(timestamp_type[r]))
            pos = _put_bytes_union(out, pos, key_valid, key_off, key_data, r)
            pos = _put_bytes_union(out, pos, val_valid, val_off, val_data, r)
            a, b = hdr_off[r], hdr_off[r + 1]
            if b > a:
                _copy(out, pos, hdr_data, a, b - a)
                pos += b - a
            else:
                out[pos] = 0
                pos += 1
            if horizon_valid[r]:
                out[pos] = 2
                pos = _put_long(out, pos + 1, horizon[r])
            else:
                out[pos] = 0
                pos += 1
        out[pos:pos + 16] = sync
        pos += 16
    return out[:pos]


@njit(inline="always")
def _skip_bytes_union(buf, pos, end):
    """(start, length, next) of a [null, bytes] value; length -1 for null; next -1 when truncated."""
    idx, pos = _get_long(buf, pos, end)
    if pos < 0:
        return 0, 0, -1
    if idx == 0:
        return pos, -1, pos
    if idx != 1:
        return 0, 0, -1
    n, pos = _get_long(buf, pos, end)
    if pos < 0 or n < 0 or pos + n > end:
        return 0, 0, -1
    return pos, n, pos + n


@njit(inline="always")
def _skip_headers(buf, pos, end):
    while True:
        count, pos = _get_long(buf, pos, end)
        if pos < 0:
            return -1
        if count == 0:
            return pos
        if count < 0:  # a block with its byte size: Avro allows it, fastavro never writes it
            count = -count
            _, pos = _get_long(buf, pos, end)
            if pos < 0:
                return -1
        for _ in range(count):
            n, pos = _get_long(buf, pos, end)
            if pos < 0 or n < 0 or pos + n > end:
                return -1
            _, _, pos = _skip_bytes_union(buf, pos + n, end)
            if pos < 0:
                return -1


@njit(cache=True, nogil=True)
def _whole_blocks(buf, pos, end, max_records):
    """Records in the whole blocks from ``pos`` that fit before ``end`` (at most max_records, unless the
    first block alone holds more)."""
    total = 0
    while pos < end:
        count, p = _get_long(buf, pos, end)
        if p < 0:
            break
        size, p = _get_long(buf, p, end)
        if p < 0 or count < 0 or size < 0 or p + size + 16 > end or (total > 0 and total + count > max_records):
            break
        total += count
        pos = p + size + 16
    return total


@njit(cache=True, nogil=True)
def decode_blocks(buf, pos, end, sync, max_records):
    """Parse whole blocks of a container file's body from ``pos`` while they fit before ``end`` and in
    ``max_records``. Returns (records, position after the last whole block parsed, error code,
    columns...) where byte fields are (start, length) pairs into ``buf`` (length -1 = null)."""
    capacity = _whole_blocks(buf, pos, end, max_records)
    offset = np.empty(capacity, dtype=np.int64)
    timestamp = np.empty(capacity, dtype=np.int64)
    ttype = np.empty(capacity, dtype=np.int32)
    key_start = np.empty(capacity, dtype=np.int64)
    key_len = np.empty(capacity, dtype=np.int64)
    val_start = np.empty(capacity, dtype=np.int64)
    val_len = np.empty(capacity, dtype=np.int64)
    hdr_start = np.empty(capacity, dtype=np.int64)
    hdr_len = np.empty(capacity, dtype=np.int64)
    horizon = np.zeros(capacity, dtype=np.int64)
    horizon_valid = np.zeros(capacity, dtype=np.bool_)
    n = 0
    err = OK
    while pos < end:
        count, p = _get_long(buf, pos, end)
        if p < 0:
            break
        size, p = _get_long(buf, p, end)
        if p < 0 or count < 0 or size < 0 or p + size + 16 > end or n + count > capacity:
            break  # past the blocks counted above
        block_end = p + size
        for _ in range(count):
            offset[n], p = _get_long(buf, p, block_end)
            if p < 0:
                break
            timestamp[n], p = _get_long(buf, p, block_end)
            if p < 0:
                break
            t, p = _get_long(buf, p, block_end)
            if p < 0:
                break
            ttype[n] = t
            key_start[n], key_len[n], p = _skip_bytes_union(buf, p, block_end)
            if p < 0:
                break
            val_start[n], val_len[n], p = _skip_bytes_union(buf, p, block_end)
            if p < 0:
                break
            hdr_start[n] = p
            p = _skip_headers(buf, p, block_end)
            if p < 0:
                break
            hdr_len[n] = p - hdr_start[n]
            idx, p = _get_long(buf, p, block_end)
            if p < 0:
                break
            if idx == 1:
                horizon[n], p = _get_long(buf, p, block_end)
                if p < 0:
                    break
                horizon_valid[n] = True
            elif idx != 0:
                p = -1
                break
            n += 1
        if p < 0:
            err = ERR_TRUNCATED
            break
        if p != block_end:
            err = ERR_FRAMING
            break
        for j in range(16):
            if buf[block_end + j] != sync[j]:
                err = ERR_SYNC
        if err != OK:
            break
        pos = block_end + 16
    return (n, pos, err, offset[:n], timestamp[:n], ttype[:n], key_start[:n], key_len[:n], val_start[:n],
            val_len[:n], hdr_start[:n], hdr_len[:n], horizon[:n], horizon_valid[:n])


@njit(cache=True, nogil=True)
def gather_binary(buf, starts, lengths):
    """Arrow binary buffers (int32 offsets, data) of slices of ``buf``; a length of -1 is a null."""
    n = starts.shape[0]
    offsets = np.empty(n + 1, dtype=np.int32)
    total = 0
    offsets[0] = 0
    for i in range(n):
        if lengths[i] > 0:
            total += lengths[i]
        offsets[i + 1] = total
    data = np.empty(total, dtype=np.uint8)
    for i in range(n):
        a = offsets[i]
        b = offsets[i + 1]
        if b > a:
            _copy(data, a, buf, starts[i], b - a)
    return offsets, data
