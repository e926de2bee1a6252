"""The offset map: key hash -> winning (offset, version), in a fixed memory budget.

Like Kafka's SkimpyOffsetMap: an open-addressing table with linear probing over one preallocated numpy
array, each slot holding a 128-bit MD5 of the key (two 64-bit words) and the winner's offset: 24 bytes a key,
plus 8 for the version under a version strategy. A slot's words sit side by side, as in Kafka's byte buffer,
so a probe costs one cache miss, not one per word. Memory is fixed at construction whatever the log holds; when
the table reaches its load factor the pass stops mapping and cleans only what it mapped.

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
_SHIFTS = np.array([7, 12, 17, 22] * 4 + [5, 9, 14, 20] * 4 + [4, 11, 16, 23] * 4 + [6, 10, 15, 21] * 4,
                   dtype=np.uint64)
_SINES = np.array([int(abs(math.sin(i + 1)) * 2**32) & 0xFFFFFFFF for i in range(64)], dtype=np.uint64)


@njit(cache=True, nogil=True)
def _md5(data, offsets, shifts, sines):
    """RFC 1321 MD5 of each data[offsets[i]:offsets[i + 1]], as the digest's two little-endian uint64 words.
    hashlib costs a Python call per key, which was most of a cleaning pass."""
    n = offsets.shape[0] - 1
    h1 = np.empty(n, dtype=np.uint64)
    h2 = np.empty(n, dtype=np.uint64)
    block = np.zeros(64, dtype=np.uint8)
    words = np.zeros(16, dtype=np.uint64)
    for i in range(n):
        start = offsets[i]
        length = offsets[i + 1] - start
        padded = ((length + 8) // 64 + 1) * 64
        a0, b0, c0, d0 = np.uint64(0x67452301), np.uint64(0xEFCDAB89), np.uint64(0x98BADCFE), np.uint64(0x10325476)
        for at in range(0, padded, 64):
            for j in range(64):
                p = at + j
                block[j] = data[start + p] if p < length else (0x80 if p == length else 0)
            if at + 64 == padded:
                bits = np.uint64(length) * np.uint64(8)
                for j in range(8):
                    block[56 + j] = (bits >> np.uint64(8 * j)) & np.uint64(0xFF)
            for j in range(16):
                words[j] = (np.uint64(block[4 * j]) | (np.uint64(block[4 * j + 1]) << np.uint64(8))
                            | (np.uint64(block[4 * j + 2]) << np.uint64(16)) | (np.uint64(block[4 * j + 3]) << np.uint64(24)))
            a, b, c, d = a0, b0, c0, d0
            for r in range(64):
                if r < 16:
                    f = (b & c) | (~b & d)
                    g = r
                elif r < 32:
                    f = (d & b) | (~d & c)
                    g = (5 * r + 1) % 16
                elif r < 48:
                    f = b ^ c ^ d
                    g = (3 * r + 5) % 16
                else:
                    f = c ^ (b | (~d & _MASK))
                    g = (7 * r) % 16
                f = (f + a + sines[r] + words[g]) & _MASK
                a, d, c = d, c, b
                b = (b + (((f << shifts[r]) | (f >> (np.uint64(32) - shifts[r]))) & _MASK)) & _MASK
            a0, b0, c0, d0 = (a0 + a) & _MASK, (b0 + b) & _MASK, (c0 + c) & _MASK, (d0 + d) & _MASK
        h1[i] = a0 | (b0 << np.uint64(32))
        h2[i] = c0 | (d0 << np.uint64(32))
    return h1, h2


def hash_keys(keys: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """MD5 of each key (a binary array without nulls) as two uint64 arrays: the digest's first and last
    8 bytes, little-endian."""
    offsets, data, _ = binary_parts(keys)
    return _md5(data, offsets, _SHIFTS, _SINES)


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
    def __init__(self, memory_bytes: int, versioned: bool, load_factor: float = 0.9) -> None:
        self.versioned = versioned
        self.bytes_per_entry = HASH_BYTES + OFFSET_BYTES + (VERSION_BYTES if versioned else 0)
        self.slots = max(2, memory_bytes // self.bytes_per_entry)
        self.max_entries = max(1, min(self.slots - 1, int(self.slots * load_factor)))
        # Hashes are kept as int64 bit patterns, so one array holds every word of a slot.
        self.table = np.zeros((self.slots, self.bytes_per_entry // 8), dtype=np.int64)
        self.off = self.table[:, OFF]
        self.ver = self.table[:, VER] if versioned else None
        self.clear()

    @property
    def nbytes(self) -> int:
        return self.table.nbytes

    @property
    def utilization(self) -> float:
        return self.size / self.slots

    def clear(self) -> None:
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
        whose key is new while the map is at its load factor; returns how many records were mapped."""
        none = np.zeros(1, dtype=np.int64)
        mapped, self.size = _insert(self.table, self.ver is not None, self.size, self.max_entries,
                                    h1.view(np.int64), h2.view(np.int64), off, none if ver is None else ver)
        return int(mapped)
