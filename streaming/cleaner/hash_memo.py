"""The key hashes of a pass's dirty records, kept from mapping to recopy so each is computed once.

Kafka's cleaner hashes every dirty key twice: once to build the offset map, once more to decide each
record's fate in the recopy. Hashing is second only to decoding in a pass here, so the hashes computed for the map
are kept (offset, two hash words: 24 bytes a record) up to a fixed budget; the recopy takes them from here
and hashes only what the memo does not hold (the clean section, and any dirty records past the budget).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from streaming.log.key_hash import hash_keys

BYTES_PER_RECORD = 24


class HashMemo:
    """Three preallocated columns, like the offset map allocated once per cleaner: a pass fills a prefix."""

    def __init__(self, budget_bytes: int) -> None:
        self.budget = max(0, budget_bytes // BYTES_PER_RECORD)
        self._off = np.empty(self.budget, dtype=np.int64)
        self._h1 = np.empty(self.budget, dtype=np.uint64)
        self._h2 = np.empty(self.budget, dtype=np.uint64)
        self.clear()

    def keep(self, off: np.ndarray, h1: np.ndarray, h2: np.ndarray) -> None:
        """Hashes of records met in increasing offset order; past the budget nothing more is kept, so
        what is held is always a prefix of the dirty range."""
        if self._full or self._held + len(off) > self.budget:
            self._full = True  # a gap would break the prefix: stop here
            return
        end = self._held + len(off)
        self._off[self._held:end], self._h1[self._held:end], self._h2[self._held:end] = off, h1, h2
        self._held = end

    def seal(self) -> None:
        self.off, self.h1, self.h2 = self._off[:self._held], self._h1[:self._held], self._h2[:self._held]

    def clear(self) -> None:
        self._held = 0
        self._full = False
        self.seal()

    def hashes(self, keys: pa.Array, off: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The hashes of ``keys`` (non-null) at offsets ``off``: from the memo where it holds them."""
        if not len(self.off):
            return hash_keys(keys)
        pos = np.minimum(np.searchsorted(self.off, off), len(self.off) - 1)
        held = self.off[pos] == off
        if held.all():
            return self.h1[pos], self.h2[pos]
        h1, h2 = np.empty(len(off), dtype=np.uint64), np.empty(len(off), dtype=np.uint64)
        h1[held], h2[held] = self.h1[pos[held]], self.h2[pos[held]]
        missing = np.flatnonzero(~held)
        h1[missing], h2[missing] = hash_keys(keys.take(pa.array(missing)))
        return h1, h2
