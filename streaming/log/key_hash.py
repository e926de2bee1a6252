"""The 128-bit hash of record keys: SipHash-2-4 in a compiled loop, one call for a whole array of keys.

The cleaner's offset map and hash memo hash with the process's own secret key (nobody who writes keys to a topic
can make two of them collide, and a collision would drop a record); a segment's key filter, which outlives the
process, hashes with a fixed one, where a collision costs only a read (streaming.log.key_filter).
"""

from __future__ import annotations

import os

import numpy as np
import pyarrow as pa
from numba import njit

from streaming.log.columns import binary_parts

# The process's SipHash key: the map and the hash memo live within one pass of one process, so no key
# hash made with it ever crosses processes, and nobody who writes keys to a topic can know it.
_KEY = np.frombuffer(os.urandom(16), dtype="<u8").copy()


@njit(inline="always")
def _rotl(x, b):
    return (x << np.uint64(b)) | (x >> np.uint64(64 - b))


@njit(inline="always")
def _rounds(v0, v1, v2, v3, n):
    for _ in range(n):
        v0 += v1
        v1 = _rotl(v1, 13) ^ v0
        v0 = _rotl(v0, 32)
        v2 += v3
        v3 = _rotl(v3, 16) ^ v2
        v0 += v3
        v3 = _rotl(v3, 21) ^ v0
        v2 += v1
        v1 = _rotl(v1, 17) ^ v2
        v2 = _rotl(v2, 32)
    return v0, v1, v2, v3


@njit(cache=True, nogil=True)
def _siphash128(data, offsets, key):
    """SipHash-2-4 with its 128-bit output (Aumasson and Bernstein's reference, siphash.c) of each
    data[offsets[i]:offsets[i + 1]], as two uint64 words. Kafka's map hashes keys with MD5; this costs a
    fraction of it, and unlike MD5, whose collisions anyone can make, two keys that collide cannot be
    made without the secret key: in the offset map a collision would drop a record."""
    n = offsets.shape[0] - 1
    h1 = np.empty(n, dtype=np.uint64)
    h2 = np.empty(n, dtype=np.uint64)
    k0, k1 = key[0], key[1]
    for i in range(n):
        start = offsets[i]
        length = offsets[i + 1] - start
        v0 = k0 ^ np.uint64(0x736F6D6570736575)
        v1 = k1 ^ np.uint64(0x646F72616E646F6D) ^ np.uint64(0xEE)
        v2 = k0 ^ np.uint64(0x6C7967656E657261)
        v3 = k1 ^ np.uint64(0x7465646279746573)
        whole = length - length % 8
        for at in range(start, start + whole, 8):
            m = np.uint64(0)
            for j in range(8):
                m |= np.uint64(data[at + j]) << np.uint64(8 * j)
            v3 ^= m
            v0, v1, v2, v3 = _rounds(v0, v1, v2, v3, 2)
            v0 ^= m
        last = np.uint64(length & 0xFF) << np.uint64(56)
        for j in range(length - whole):
            last |= np.uint64(data[start + whole + j]) << np.uint64(8 * j)
        v3 ^= last
        v0, v1, v2, v3 = _rounds(v0, v1, v2, v3, 2)
        v0 ^= last
        v2 ^= np.uint64(0xEE)
        v0, v1, v2, v3 = _rounds(v0, v1, v2, v3, 4)
        h1[i] = v0 ^ v1 ^ v2 ^ v3
        v1 ^= np.uint64(0xDD)
        v0, v1, v2, v3 = _rounds(v0, v1, v2, v3, 4)
        h2[i] = v0 ^ v1 ^ v2 ^ v3
    return h1, h2


def hash_keys(keys: pa.Array, key: np.ndarray = _KEY) -> tuple[np.ndarray, np.ndarray]:
    """The 128-bit SipHash of each key (a binary array without nulls) as two uint64 arrays; ``key``: the
    SipHash key as two little-endian uint64 words (the process's own unless given)."""
    offsets, data, _ = binary_parts(keys)
    return _siphash128(data, offsets, key)
