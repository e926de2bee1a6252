"""The offset map: key hash -> winning (offset, version), in a fixed memory budget.

Like Kafka's SkimpyOffsetMap: an open-addressing table with linear probing over one preallocated numpy
array, each slot holding a 128-bit MD5 of the key (two 64-bit words) and the winner's offset: 24 bytes a key,
plus 8 for the version under a version strategy. A slot's words sit side by side, as in Kafka's byte buffer,
so a probe costs one cache miss, not one per word. The budget is fixed at construction: when the map holds
the budget's load factor of keys, the pass stops mapping and cleans only what it mapped.

Unlike Kafka's buffer, the table is not all allocated up front: each pass says how many records it can map
at most, and the table grows to that (never past the budget) and stays. Spark starts Python workers afresh,
and filling the whole budget's pages was most of a small partition's first pass there (bench/README.md).

All operations take whole chunks of keys; probing, inserting and ranking run in compiled loops (numba),
as is the MD5 of the keys: no Python call per record.
"""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa
from numba import njit

from streaming.log.columns import binary_parts

HASH_BYTES = 16
OFFSET_BYTES = 8
VERSION_BYTES = 8
EMPTY = -1


_MASK = np.uint64(0xFFFFFFFF)
_SINES = np.array([int(abs(math.sin(i + 1)) * 2**32) & 0xFFFFFFFF for i in range(64)], dtype=np.uint64)


@njit(inline="always")
def _step(a, b, f, sine, word, shift):
    """One MD5 step: b + ((a + f + sine + word) <<< shift), in 32 bits."""
    x = (a + f + sine + word) & _MASK
    return (b + (((x << np.uint64(shift)) | (x >> np.uint64(32 - shift))) & _MASK)) & _MASK


@njit(cache=True, nogil=True)
def _md5(data, offsets, sines):
    """RFC 1321 MD5 of each data[offsets[i]:offsets[i + 1]], as the digest's two little-endian uint64 words.
    hashlib costs a Python call per key, which was most of a cleaning pass; each round's four steps are
    written out so the compiled loop carries no per-step branch or table of shifts."""
    n = offsets.shape[0] - 1
    h1 = np.empty(n, dtype=np.uint64)
    h2 = np.empty(n, dtype=np.uint64)
    block = np.zeros(64, dtype=np.uint8)
    w = np.zeros(16, dtype=np.uint64)
    m = _MASK
    for i in range(n):
        start = offsets[i]
        length = offsets[i + 1] - start
        padded = ((length + 8) // 64 + 1) * 64
        a0, b0, c0, d0 = np.uint64(0x67452301), np.uint64(0xEFCDAB89), np.uint64(0x98BADCFE), np.uint64(0x10325476)
        for at in range(0, padded, 64):
            take = min(64, max(0, length - at))
            block[:take] = data[start + at: start + at + take]
            block[take:] = 0
            if take < 64 and at <= length:
                block[length - at] = 0x80
            if at + 64 == padded:
                bits = np.uint64(length) * np.uint64(8)
                for j in range(8):
                    block[56 + j] = (bits >> np.uint64(8 * j)) & np.uint64(0xFF)
            for j in range(16):
                w[j] = (np.uint64(block[4 * j]) | (np.uint64(block[4 * j + 1]) << np.uint64(8))
                        | (np.uint64(block[4 * j + 2]) << np.uint64(16)) | (np.uint64(block[4 * j + 3]) << np.uint64(24)))
            a, b, c, d = a0, b0, c0, d0
            for r in range(0, 16, 4):
                a = _step(a, b, (b & c) | (~b & d & m), sines[r], w[r], 7)
                d = _step(d, a, (a & b) | (~a & c & m), sines[r + 1], w[r + 1], 12)
                c = _step(c, d, (d & a) | (~d & b & m), sines[r + 2], w[r + 2], 17)
                b = _step(b, c, (c & d) | (~c & a & m), sines[r + 3], w[r + 3], 22)
            for r in range(16, 32, 4):
                a = _step(a, b, (b & d) | (c & ~d & m), sines[r], w[(5 * r + 1) % 16], 5)
                d = _step(d, a, (a & c) | (b & ~c & m), sines[r + 1], w[(5 * r + 6) % 16], 9)
                c = _step(c, d, (d & b) | (a & ~b & m), sines[r + 2], w[(5 * r + 11) % 16], 14)
                b = _step(b, c, (c & a) | (d & ~a & m), sines[r + 3], w[(5 * r + 16) % 16], 20)
            for r in range(32, 48, 4):
                a = _step(a, b, b ^ c ^ d, sines[r], w[(3 * r + 5) % 16], 4)
                d = _step(d, a, a ^ b ^ c, sines[r + 1], w[(3 * r + 8) % 16], 11)
                c = _step(c, d, d ^ a ^ b, sines[r + 2], w[(3 * r + 11) % 16], 16)
                b = _step(b, c, c ^ d ^ a, sines[r + 3], w[(3 * r + 14) % 16], 23)
            for r in range(48, 64, 4):
                a = _step(a, b, c ^ (b | (~d & m)), sines[r], w[(7 * r) % 16], 6)
                d = _step(d, a, b ^ (a | (~c & m)), sines[r + 1], w[(7 * r + 7) % 16], 10)
                c = _step(c, d, a ^ (d | (~b & m)), sines[r + 2], w[(7 * r + 14) % 16], 15)
                b = _step(b, c, d ^ (c | (~a & m)), sines[r + 3], w[(7 * r + 21) % 16], 21)
            a0, b0, c0, d0 = (a0 + a) & m, (b0 + b) & m, (c0 + c) & m, (d0 + d) & m
        h1[i] = a0 | (b0 << np.uint64(32))
        h2[i] = c0 | (d0 << np.uint64(32))
    return h1, h2


def hash_keys(keys: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """MD5 of each key (a binary array without nulls) as two uint64 arrays: the digest's first and last
    8 bytes, little-endian."""
    offsets, data, _ = binary_parts(keys)
    return _md5(data, offsets, _SINES)


def rank_greater(v1: np.ndarray | None, o1: np.ndarray, v2: np.ndarray | None, o2: np.ndarray) -> np.ndarray:
    """Elementwise (v1, o1) > (v2, o2): the KIP-280 winner rule (version, then offset)."""
    if v1 is None:
        return o1 > o2
    return (v1 > v2) | ((v1 == v2) & (o1 > o2))


H1, H2, OFF, VER = 0, 1, 2, 3  # the words of a slot


@njit(cache=True, nogil=True)
def _probe(table, a, b):
    """The slot holding hash (a, b), or the empty slot where its probe path ends."""
    slots = table.shape[0]
    s = np.int64(np.uint64(a) % np.uint64(slots))
    while table[s, OFF] != EMPTY and not (table[s, H1] == a and table[s, H2] == b):
        s += 1
        if s == slots:
            s = 0
    return s


@njit(cache=True, nogil=True)
def _insert(table, versioned, size, max_entries, h1, h2, off, ver):
    """Map records in order, keeping each key's best rank; stop at the first record whose key is new when
    the map is at max_entries. Returns (records mapped, new size)."""
    for i in range(h1.shape[0]):
        s = _probe(table, h1[i], h2[i])
        if table[s, OFF] == EMPTY:
            if size >= max_entries:
                return i, size
            table[s, H1] = h1[i]
            table[s, H2] = h2[i]
            size += 1
        elif versioned:
            if ver[i] < table[s, VER] or (ver[i] == table[s, VER] and off[i] < table[s, OFF]):
                continue
        elif off[i] < table[s, OFF]:
            continue
        table[s, OFF] = off[i]
        if versioned:
            table[s, VER] = ver[i]
    return h1.shape[0], size


@njit(cache=True, nogil=True)
def _lookup(table, h1, h2):
    found = np.empty(h1.shape[0], dtype=np.int64)
    for i in range(h1.shape[0]):
        s = _probe(table, h1[i], h2[i])
        found[i] = -1 if table[s, OFF] == EMPTY else s
    return found


class OffsetMap:
    def __init__(self, memory_bytes: int, versioned: bool, load_factor: float = 0.9,
                 records: int | None = None) -> None:
        """Room for ``records`` records at first (None: the whole budget); clear() grows it."""
        self.versioned = versioned
        self.load_factor = load_factor
        self.bytes_per_entry = HASH_BYTES + OFFSET_BYTES + (VERSION_BYTES if versioned else 0)
        self.slots = max(2, memory_bytes // self.bytes_per_entry)  # the budget's
        self.max_entries = self._entries(self.slots)
        self._allocate(self._slots_for(records))
        self.clear()

    def _entries(self, slots: int) -> int:
        """Keys a table of ``slots`` takes at the load factor (one slot stays empty, so probes end)."""
        return max(1, min(slots - 1, int(slots * self.load_factor)))

    def _slots_for(self, records: int | None) -> int:
        return self.slots if records is None else min(self.slots, int(records / self.load_factor) + 2)

    def _allocate(self, slots: int) -> None:
        # Hashes are kept as int64 bit patterns, so one array holds every word of a slot.
        self.table = np.empty((slots, self.bytes_per_entry // 8), dtype=np.int64)
        self.off = self.table[:, OFF]
        self.ver = self.table[:, VER] if self.versioned else None

    @property
    def nbytes(self) -> int:
        """Bytes allocated now: at most the budget."""
        return self.table.nbytes

    @property
    def utilization(self) -> float:
        """Of the budget, as Kafka's max-buffer-utilization-percent reports it."""
        return self.size / self.slots

    def clear(self, records: int | None = None) -> None:
        """Empty the map for a pass that maps at most ``records`` records: the table grows to hold that many
        keys at the load factor (doubling, so passes of slowly growing ranges do not reallocate each time),
        never past the budget. None keeps the table as it is."""
        needed = self._slots_for(records or 0)
        if needed > self.table.shape[0]:
            self._allocate(min(self.slots, max(needed, 2 * self.table.shape[0])))
        self.off.fill(EMPTY)
        self.size = 0

    def get(self, h1: np.ndarray, h2: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """(slot or -1, winning offset or -1, winning version) for each hash."""
        found = _lookup(self.table, h1.view(np.int64), h2.view(np.int64))
        hit = found >= 0
        off = np.where(hit, self.off[np.where(hit, found, 0)], EMPTY)
        ver = self.ver[np.where(hit, found, 0)] if self.ver is not None else None
        return found, off, ver

    def set_at(self, slots: np.ndarray, off: np.ndarray, ver: np.ndarray | None) -> None:
        """Overwrite the winner of keys already in the map."""
        self.off[slots] = off
        if self.ver is not None:
            self.ver[slots] = ver

    def put(self, h1: np.ndarray, h2: np.ndarray, off: np.ndarray, ver: np.ndarray | None) -> int:
        """Map records in offset order, each key keeping its best-ranked record. Stops at the first record
        whose key is new while the map is at its load factor (the budget's, or the table's when the pass
        brings more records than it said); returns how many records were mapped."""
        none = np.zeros(1, dtype=np.int64)
        mapped, self.size = _insert(self.table, self.ver is not None, self.size, self._entries(self.table.shape[0]),
                                    h1.view(np.int64), h2.view(np.int64), off, none if ver is None else ver)
        return int(mapped)
