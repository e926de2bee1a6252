"""The offset map: key hash -> winning (offset, version), in a fixed memory budget.

Like Kafka's SkimpyOffsetMap: an open-addressing table with linear probing over one preallocated numpy
array, each slot holding a 128-bit hash of the key (two 64-bit words) and the winner's offset: 24 bytes a key,
plus 8 for the version under a version strategy. A slot's words sit side by side, as in Kafka's byte buffer,
so a probe costs one cache miss, not one per word. The budget is fixed at construction: when the map holds
the budget's load factor of keys, the pass stops mapping and cleans only what it mapped.

Unlike Kafka's buffer, the table is not all allocated up front: it starts small and doubles as keys come,
up to what the pass says it can map and never past the budget, and stays for the next pass. Spark starts
Python workers afresh, and a page touched for the first time costs more here than the probes that use it:
a pass of many updates to few keys sized its table by its records, not its keys, and filling it took
longer than mapping (bench/README.md). Below the budget the table grows at half full, so probes stay short.

All operations take whole chunks of keys; probing, inserting and ranking run in compiled loops (numba),
as is the hash of the keys (streaming.log.key_hash, where Kafka uses MD5): no Python call per record.
"""

from __future__ import annotations

import numpy as np
from numba import njit


HASH_BYTES = 16
OFFSET_BYTES = 8
VERSION_BYTES = 8
EMPTY = -1


def rank_greater(v1: np.ndarray | None, o1: np.ndarray, v2: np.ndarray | None, o2: np.ndarray) -> np.ndarray:
    """Elementwise (v1, o1) > (v2, o2): the KIP-280 winner rule (version, then offset)."""
    if v1 is None:
        return o1 > o2
    return (v1 > v2) | ((v1 == v2) & (o1 > o2))


H1, H2, OFF, VER = 0, 1, 2, 3  # the words of a slot
FIRST_SLOTS = 1 << 12  # a new map's table, at most (the budget may be smaller)
GROW_LOAD = 0.5  # a table that may still grow does so at this load


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
def _rehash(old, new):
    """Every mapped slot of ``old`` into ``new`` (empty, larger)."""
    for s in range(old.shape[0]):
        if old[s, OFF] != EMPTY:
            t = _probe(new, old[s, H1], old[s, H2])
            for w in range(old.shape[1]):
                new[t, w] = old[s, w]


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
        """A map for passes of at most ``records`` records at first (None: as many as the budget takes)."""
        self.versioned = versioned
        self.load_factor = load_factor
        self.bytes_per_entry = HASH_BYTES + OFFSET_BYTES + (VERSION_BYTES if versioned else 0)
        self.slots = max(2, memory_bytes // self.bytes_per_entry)  # the budget's
        self.max_entries = self._entries(self.slots)
        self._allocate(min(self.slots, FIRST_SLOTS))
        self.clear(records)

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
        self.off.fill(EMPTY)

    def _grow(self) -> None:
        old = self.table
        self._allocate(min(self.cap, 2 * old.shape[0]))
        _rehash(old, self.table)

    def _limit(self) -> int:
        """Keys the table takes before it grows, or, where it can grow no more, before the pass stops."""
        slots = self.table.shape[0]
        return max(1, int(slots * GROW_LOAD)) if slots < self.cap else self._entries(slots)

    @property
    def nbytes(self) -> int:
        """Bytes allocated now: at most the budget."""
        return self.table.nbytes

    @property
    def utilization(self) -> float:
        """Of the budget, as Kafka's max-buffer-utilization-percent reports it."""
        return self.size / self.slots

    def clear(self, records: int | None = None) -> None:
        """Empty the map for a pass that maps at most ``records`` records (None: as many as the budget
        takes): the table may grow to hold that many keys at the load factor, never past the budget."""
        self.cap = max(self.table.shape[0], self._slots_for(records))
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
        h1, h2 = h1.view(np.int64), h2.view(np.int64)
        ver = none if ver is None else ver
        done = 0
        while True:
            mapped, self.size = _insert(self.table, self.ver is not None, self.size, self._limit(), h1[done:],
                                        h2[done:], off[done:], ver if ver is none else ver[done:])
            done += int(mapped)
            if done == len(off) or self.table.shape[0] >= self.cap:
                return done
            self._grow()
