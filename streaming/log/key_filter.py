"""A sealed segment's keys as a Bloom filter, kept in its SegmentMeta (and so in the manifest).

A cleaning pass must find every clean record whose key its dirty range holds; Kafka's cleaner reads the whole
clean section each pass to find them. Where a whole cluster trickles, a log's clean section is most of what a pass
reads, and almost none of it changes. A clean segment whose filter holds none of the dirty range's keys is left
unread. A filter never misses a key it holds; it may claim one it does not, which costs only that read.

Only segments of at most MAX_KEYS keys get one: the filter is written in every manifest of the log, and a large
segment's read is paid for by its records. The hash key is fixed, not the process's secret
(streaming.log.key_hash): the filter outlives the process. Keys made to collide in it cost reads, never records.
"""

from __future__ import annotations

import base64

import numpy as np
import pyarrow as pa
from numba import njit

from streaming.log.key_hash import hash_keys

MAX_KEYS = 4096
BITS_PER_KEY = 10  # with PROBES probes: about 1% of absent keys claimed
PROBES = 7
_HASH_KEY = np.array([0x6B636F6D70616374, 0x6B65792D66696C74], dtype=np.uint64)  # b"kcompact", b"key-filt"


def fingerprints(keys: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """The hashes a filter is built from and asked with (keys without nulls)."""
    return hash_keys(keys, _HASH_KEY)


@njit(cache=True, nogil=True)
def _set(words, h1, h2):
    bits = np.uint64(words.shape[0] * 64)
    for i in range(h1.shape[0]):
        for p in range(PROBES):
            bit = (h1[i] + np.uint64(p) * h2[i]) % bits
            words[bit >> np.uint64(6)] |= np.uint64(1) << (bit & np.uint64(63))


@njit(cache=True, nogil=True)
def _any_held(words, h1, h2):
    bits = np.uint64(words.shape[0] * 64)
    for i in range(h1.shape[0]):
        held = True
        for p in range(PROBES):
            bit = (h1[i] + np.uint64(p) * h2[i]) % bits
            if not (words[bit >> np.uint64(6)] >> (bit & np.uint64(63))) & np.uint64(1):
                held = False
                break
        if held:
            return True
    return False


def build(h1: np.ndarray, h2: np.ndarray) -> str | None:
    """The filter of these fingerprints, as the manifest keeps it (base64 of its 64-bit words); None past
    MAX_KEYS."""
    if len(h1) > MAX_KEYS:
        return None
    words = np.zeros(max(1, -(-len(h1) * BITS_PER_KEY // 64)), dtype="<u8")
    _set(words, h1, h2)
    return base64.b64encode(words.tobytes()).decode("ascii")


def holds_any(encoded: str, h1: np.ndarray, h2: np.ndarray) -> bool:
    """Whether the filter may hold any of these fingerprints (False: it holds none of them)."""
    if not len(h1):
        return False
    return bool(_any_held(np.frombuffer(base64.b64decode(encoded), dtype="<u8"), h1, h2))


class FilterBuilder:
    """A segment's fingerprints gathered as its records go by, while a filter can still be built: not past MAX_KEYS,
    and not once a caller gives up (a tombstone without its horizon: a pass must read it to give it one)."""

    def __init__(self) -> None:
        self._h1: list[np.ndarray] = []
        self._h2: list[np.ndarray] = []
        self._keys = 0
        self.wants = True

    def add(self, h1: np.ndarray, h2: np.ndarray) -> None:
        self._keys += len(h1)
        if self._keys > MAX_KEYS:
            self.give_up()
        elif self.wants:
            self._h1.append(h1)
            self._h2.append(h2)

    def give_up(self) -> None:
        self.wants = False
        self._h1.clear()
        self._h2.clear()

    def build(self) -> str | None:
        if not self.wants:
            return None
        return build(np.concatenate(self._h1 or [np.empty(0, np.uint64)]),
                     np.concatenate(self._h2 or [np.empty(0, np.uint64)]))
