"""The hash memo hands the recopy the same hashes it would compute, whether it holds them or not."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from streaming.cleaner.hash_memo import BYTES_PER_RECORD, HashMemo
from streaming.log.key_hash import hash_keys


def _batch(offsets: range) -> tuple[pa.Array, np.ndarray]:
    return pa.array([b"key-%d" % (o % 7) for o in offsets], pa.binary()), np.array(offsets, dtype=np.int64)


def test_held_and_missing_hashes_equal_computed_ones() -> None:
    memo = HashMemo(25 * BYTES_PER_RECORD)
    for lo in (0, 10, 20, 30):  # the third batch overflows the budget: only a prefix [0, 20) is held
        keys, off = _batch(range(lo, lo + 10))
        memo.keep(off, *hash_keys(keys))
    memo.seal()
    assert memo.off.tolist() == list(range(20)), "a prefix of the dirty range, no gap"
    keys, off = _batch(range(15, 40, 2))  # part held, part not
    want = hash_keys(keys)
    got = memo.hashes(keys, off)
    assert all(np.array_equal(g, w) for g, w in zip(got, want, strict=True))


def test_clear_restores_the_budget() -> None:
    memo = HashMemo(5 * BYTES_PER_RECORD)
    keys, off = _batch(range(10))
    memo.keep(off, *hash_keys(keys))
    memo.clear()
    keys, off = _batch(range(4))
    memo.keep(off, *hash_keys(keys))
    memo.seal()
    assert memo.off.tolist() == [0, 1, 2, 3]
