"""The offset map: key hash -> winning (offset, version), in a fixed memory budget.

Like Kafka's SkimpyOffsetMap: an open-addressing table with linear probing over preallocated numpy
arrays, holding a 128-bit MD5 of the key (two uint64 words) and the winner's offset: 24 bytes a key, plus
8 for the version under a version strategy. Memory is fixed at construction whatever the log holds; when
the table reaches its load factor the pass stops mapping and cleans only what it mapped.

All operations take whole chunks of keys; probing, inserting and ranking run in compiled loops (numba),
so the per-record Python cost is one MD5 call.
"""

from __future__ import annotations

import hashlib
from typing import Sequence

import numpy as np
from numba import njit

HASH_BYTES = 16
OFFSET_BYTES = 8
VERSION_BYTES = 8
EMPTY = -1


def hash_keys(keys: Sequence[bytes]) -> tuple[np.ndarray, np.ndarray]:
    """MD5 of each key as two uint64 arrays (high, low)."""
    md5 = hashlib.md5
    digests = b"".join([md5(k).digest() for k in keys])
    words = np.frombuffer(digests, dtype="<u8").reshape(-1, 2) if keys else np.empty((0, 2), dtype="<u8")
    return words[:, 0].copy(), words[:, 1].copy()


def rank_greater(v1: np.ndarray | None, o1: np.ndarray, v2: np.ndarray | None, o2: np.ndarray) -> np.ndarray:
    """Elementwise (v1, o1) > (v2, o2): the KIP-280 winner rule (version, then offset)."""
    if v1 is None:
        return o1 > o2
    return (v1 > v2) | ((v1 == v2) & (o1 > o2))


@njit(cache=True, nogil=True)
def _probe(th1, th2, toff, a, b):
    """The slot holding hash (a, b), or the empty slot where its probe path ends."""
    slots = th1.shape[0]
    s = np.int64(a % np.uint64(slots))
    while toff[s] != EMPTY and not (th1[s] == a and th2[s] == b):
        s += 1
        if s == slots:
            s = 0
    return s


@njit(cache=True, nogil=True)
def _insert(th1, th2, toff, tver, versioned, size, max_entries, h1, h2, off, ver):
    """Map records in order, keeping each key's best rank; stop at the first record whose key is new when
    the map is at max_entries. Returns (records mapped, new size)."""
    for i in range(h1.shape[0]):
        s = _probe(th1, th2, toff, h1[i], h2[i])
        if toff[s] == EMPTY:
            if size >= max_entries:
                return i, size
            th1[s] = h1[i]
            th2[s] = h2[i]
            size += 1
        elif versioned:
            if ver[i] < tver[s] or (ver[i] == tver[s] and off[i] < toff[s]):
                continue
        elif off[i] < toff[s]:
            continue
        toff[s] = off[i]
        if versioned:
            tver[s] = ver[i]
    return h1.shape[0], size


@njit(cache=True, nogil=True)
def _lookup(th1, th2, toff, h1, h2):
    found = np.empty(h1.shape[0], dtype=np.int64)
    for i in range(h1.shape[0]):
        s = _probe(th1, th2, toff, h1[i], h2[i])
        found[i] = -1 if toff[s] == EMPTY else s
    return found


class OffsetMap:
    def __init__(self, memory_bytes: int, versioned: bool, load_factor: float = 0.9) -> None:
        self.versioned = versioned
        self.bytes_per_entry = HASH_BYTES + OFFSET_BYTES + (VERSION_BYTES if versioned else 0)
        self.slots = max(2, memory_bytes // self.bytes_per_entry)
        self.max_entries = max(1, min(self.slots - 1, int(self.slots * load_factor)))
        self.h1 = np.zeros(self.slots, dtype=np.uint64)
        self.h2 = np.zeros(self.slots, dtype=np.uint64)
        self.off = np.full(self.slots, EMPTY, dtype=np.int64)
        self.ver = np.zeros(self.slots, dtype=np.int64) if versioned else None
        self.size = 0

    @property
    def nbytes(self) -> int:
        return self.h1.nbytes + self.h2.nbytes + self.off.nbytes + (self.ver.nbytes if self.ver is not None else 0)

    @property
    def utilization(self) -> float:
        return self.size / self.slots

    def clear(self) -> None:
        self.off.fill(EMPTY)
        self.size = 0

    def get(self, h1: np.ndarray, h2: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """(slot or -1, winning offset or -1, winning version) for each hash."""
        found = _lookup(self.h1, self.h2, self.off, h1, h2)
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
        mapped, self.size = _insert(self.h1, self.h2, self.off, none if self.ver is None else self.ver,
                                    self.ver is not None, self.size, self.max_entries, h1, h2, off,
                                    none if ver is None else ver)
        return int(mapped)
