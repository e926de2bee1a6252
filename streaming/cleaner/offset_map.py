"""The offset map: key hash -> winning (offset, version), in a fixed memory budget.

Like Kafka's SkimpyOffsetMap: an open-addressing table with linear probing over preallocated numpy
arrays, holding a 128-bit MD5 of the key (two uint64 words) and the winner's offset: 24 bytes a key, plus
8 for the version under a version strategy. Memory is fixed at construction whatever the log holds; when
the table reaches its load factor the pass stops mapping and cleans only what it mapped.

All operations take whole chunks of keys and work on numpy arrays: probing, conflict resolution and rank
comparison are vectorised, so the per-record Python cost is one MD5 call.
"""

from __future__ import annotations

import hashlib
from typing import Sequence

import numpy as np

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


def chunk_winners(h1: np.ndarray, h2: np.ndarray, off: np.ndarray, ver: np.ndarray | None) -> np.ndarray:
    """Indices of the best-ranked record per distinct hash within one chunk."""
    if ver is None:
        order = np.lexsort((off, h2, h1))
    else:
        order = np.lexsort((off, ver, h2, h1))
    sh1, sh2 = h1[order], h2[order]
    last = np.ones(len(order), dtype=bool)
    last[:-1] = (sh1[1:] != sh1[:-1]) | (sh2[1:] != sh2[:-1])
    return order[last]


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
        self._slots_u = np.uint64(self.slots)

    @property
    def nbytes(self) -> int:
        return self.h1.nbytes + self.h2.nbytes + self.off.nbytes + (self.ver.nbytes if self.ver is not None else 0)

    @property
    def utilization(self) -> float:
        return self.size / self.slots

    @property
    def full(self) -> bool:
        return self.size >= self.max_entries

    def clear(self) -> None:
        self.off.fill(EMPTY)
        self.size = 0

    def find(self, h1: np.ndarray, h2: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """For each hash: (slot holding it or -1, first empty slot on its probe path or -1)."""
        n = len(h1)
        found = np.full(n, -1, dtype=np.int64)
        empty = np.full(n, -1, dtype=np.int64)
        slot = (h1 % self._slots_u).astype(np.int64)
        active = np.arange(n)
        while active.size:
            s = slot[active]
            occupied = self.off[s] != EMPTY
            match = occupied & (self.h1[s] == h1[active]) & (self.h2[s] == h2[active])
            found[active[match]] = s[match]
            free = ~occupied
            empty[active[free]] = s[free]
            active = active[occupied & ~match]
            slot[active] = (slot[active] + 1) % self.slots
        return found, empty

    def get(self, h1: np.ndarray, h2: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """(slot or -1, winning offset or -1, winning version) for each hash."""
        found, _ = self.find(h1, h2)
        hit = found >= 0
        off = np.where(hit, self.off[np.where(hit, found, 0)], EMPTY)
        ver = self.ver[np.where(hit, found, 0)] if self.ver is not None else None
        return found, off, ver

    def set_at(self, slots: np.ndarray, off: np.ndarray, ver: np.ndarray | None) -> None:
        """Overwrite the winner of keys already in the map."""
        self.off[slots] = off
        if self.ver is not None:
            self.ver[slots] = ver

    def new_key_positions(self, h1: np.ndarray, h2: np.ndarray) -> np.ndarray:
        """Boolean mask: the first occurrence, in chunk order, of each key not yet in the map."""
        found, _ = self.find(h1, h2)
        first = np.zeros(len(h1), dtype=bool)
        if len(h1):
            pairs = np.stack([h1, h2], axis=1)
            _, idx = np.unique(pairs, axis=0, return_index=True)
            first[idx] = True
        return first & (found < 0)

    def put_winners(self, h1: np.ndarray, h2: np.ndarray, off: np.ndarray, ver: np.ndarray | None) -> None:
        """Merge one chunk's per-key winners (distinct hashes) into the map, keeping the best rank."""
        found, empty = self.find(h1, h2)
        hit = found >= 0
        if hit.any():
            s = found[hit]
            better = rank_greater(None if ver is None else ver[hit], off[hit],
                                  None if self.ver is None else self.ver[s], self.off[s])
            self.set_at(s[better], off[hit][better], None if ver is None else ver[hit][better])
        pending = np.flatnonzero(~hit)
        target = empty[pending]
        while pending.size:
            # Several new keys may probe to the same empty slot: the first takes it, the rest probe on.
            _, first = np.unique(target, return_index=True)
            won = pending[first]
            slots = target[first]
            self.h1[slots] = h1[won]
            self.h2[slots] = h2[won]
            self.off[slots] = off[won]
            if self.ver is not None:
                self.ver[slots] = ver[won]
            self.size += len(won)
            keep = np.ones(pending.size, dtype=bool)
            keep[first] = False
            pending = pending[keep]
            if pending.size:
                _, target = self.find(h1[pending], h2[pending])
