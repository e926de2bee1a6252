"""A sealed segment's keys as sorted 32-bit fingerprints, kept in its SegmentMeta (and so in the manifest).

A cleaning pass must find every clean record whose key its dirty range holds; Kafka's cleaner reads the whole
clean section each pass to find them. Where a whole cluster trickles, a log's clean section is most of what a pass
reads, and almost none of it changes. A clean segment whose fingerprints hold none of the dirty range's keys is left
unread. A key's fingerprint is never missing; an absent key matches one of n fingerprints with a chance of about
n / 2^32, which costs only that read. (A Bloom filter of 10 bits a key, a third of the size, claimed 2% of absent
keys: a pass of a hundred new keys would have read most segments anyway.)

Only segments of at most MAX_KEYS keys get them: they are written in every manifest of the log, and a large
segment's read is paid for by its records. The hash key is fixed, not the process's secret
(streaming.log.key_hash): the fingerprints outlive the process. Keys made to collide cost reads, never records.
"""

from __future__ import annotations

import base64

import numpy as np
import pyarrow as pa

from streaming.log.key_hash import hash_keys

MAX_KEYS = 1024
_HASH_KEY = np.array([0x6B636F6D70616374, 0x6B65792D66696C74], dtype=np.uint64)  # b"kcompact", b"key-filt"


def fingerprints(keys: pa.Array) -> np.ndarray:
    """The keys' fingerprints (keys without nulls), as filters are built from and asked with."""
    return (hash_keys(keys, _HASH_KEY)[0] >> np.uint64(32)).astype("<u4")


def build(prints: np.ndarray) -> str | None:
    """The filter of these fingerprints, as the manifest keeps it (base64 of the sorted distinct ones); None past
    MAX_KEYS."""
    distinct = np.unique(prints)
    return None if len(distinct) > MAX_KEYS else base64.b64encode(distinct.tobytes()).decode("ascii")


def asked(prints: np.ndarray) -> np.ndarray:
    """Fingerprints to ask filters with: sorted and distinct, so each filter's at most MAX_KEYS are looked up in
    them (a pass of a million keys asks a thousand filters in milliseconds, not in minutes)."""
    return np.unique(prints)


def holds_any(encoded: str, asking: np.ndarray) -> bool:
    """Whether the filter may hold any of these fingerprints (``asked``'s); False: it holds none of them."""
    held = np.frombuffer(base64.b64decode(encoded), dtype="<u4")
    if not len(held) or not len(asking):
        return False
    at = np.minimum(np.searchsorted(asking, held), len(asking) - 1)
    return bool((asking[at] == held).any())


class FilterBuilder:
    """A segment's fingerprints gathered as its records go by, while a filter can still be built: not past MAX_KEYS
    records with a key, and not once a caller gives up (a tombstone without its horizon: a pass must read it to give
    it one)."""

    def __init__(self) -> None:
        self._prints: list[np.ndarray] = []
        self._keys = 0
        self.wants = True

    def add(self, prints: np.ndarray) -> None:
        self._keys += len(prints)
        if self._keys > MAX_KEYS:
            self.give_up()
        elif self.wants:
            self._prints.append(prints)

    def give_up(self) -> None:
        self.wants = False
        self._prints.clear()

    def build(self) -> str | None:
        return build(np.concatenate(self._prints or [np.empty(0, "<u4")])) if self.wants else None
