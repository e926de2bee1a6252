"""The offset map: fixed memory, Kafka-sized entries, correct winners, partial passes when full."""

from __future__ import annotations

import random

import hashlib

import numpy as np
import pyarrow as pa
from hypothesis import example, given, settings
from hypothesis import strategies as st

from streaming.cleaner import CompactionConfig, LogCleanerManager
from streaming.partition_id import PartitionId
from streaming.cleaner.offset_map import OffsetMap, hash_keys
from streaming.log import PartitionLog, make_record


def test_bytes_per_key_match_kafkas_budget() -> None:
    assert OffsetMap(24_000, versioned=False).bytes_per_entry == 24
    assert OffsetMap(32_000, versioned=True).bytes_per_entry == 32
    m = OffsetMap(64 * 2**20, versioned=False)
    assert m.nbytes <= 64 * 2**20
    assert m.max_entries == int(m.slots * 0.9)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 40), st.integers(-3, 3)), max_size=300), st.booleans(),
       st.integers(1, 5))
def test_winners_match_a_dict(entries, versioned: bool, chunks: int) -> None:
    m = OffsetMap(48 * 64, versioned)
    ref: dict[bytes, tuple[int, int]] = {}
    keys = [b"k%d" % k for k, _ in entries]
    vers = [v if versioned else 0 for _, v in entries]
    for i, (k, v) in enumerate(zip(keys, vers, strict=True)):
        ref[k] = max(ref.get(k, (v, i)), (v, i))
    bounds = np.linspace(0, len(keys), chunks + 1).astype(int)
    for lo, hi in zip(bounds, bounds[1:], strict=False):
        h1, h2 = hash_keys(pa.array(keys[lo:hi], pa.binary()))
        off = np.arange(lo, hi, dtype=np.int64)
        ver = np.array(vers[lo:hi], dtype=np.int64) if versioned else None
        assert m.put(h1, h2, off, ver) == hi - lo
    assert m.size == len(ref)
    h1, h2 = hash_keys(pa.array(list(ref), pa.binary()))
    _, off, _ = m.get(h1, h2)
    assert off.tolist() == [ref[k][1] for k in ref]


def test_full_map_cleans_in_several_passes_each_progressing(tmp_path) -> None:
    c = CompactionConfig(min_cleanable_dirty_ratio=0, dedupe_buffer_size=24 * 100)
    plog = PartitionLog(str(tmp_path), c.log_config, jitter_seed="x")
    keys = list(range(1000))
    random.Random(1).shuffle(keys)
    plog.append([make_record(i, b"key-%d" % k, b"v", 0) for i, k in enumerate(keys + keys[:200])])
    plog.roll()
    mgr = LogCleanerManager(c)
    ends, pid = [], PartitionId("t", 0)
    while (outcome := mgr.clean_partition(pid, plog, 0)).result is not None:
        assert outcome.result.buffer_utilization <= 0.9 + 1e-9
        ends.append(outcome.result.end_offset)
    assert len(ends) >= 12 and ends == sorted(set(ends)) and ends[-1] == 1200
    assert sorted(r["key"] for r in plog.read()) == sorted(b"key-%d" % k for k in keys)
    assert mgr.cleaner.map.nbytes <= 24 * 100


@settings(max_examples=300, deadline=None)
@given(st.lists(st.binary(max_size=200), max_size=40))
@example([bytes(range(n)) for n in (0, 1, 55, 56, 57, 63, 64, 65, 119, 120, 128, 200)])  # padding edges
def test_key_hashes_are_md5(keys: list[bytes]) -> None:
    h1, h2 = hash_keys(pa.array(keys, pa.binary()))
    digests = b"".join(hashlib.md5(k).digest() for k in keys)
    words = np.frombuffer(digests, dtype="<u8").reshape(-1, 2) if keys else np.empty((0, 2), dtype="<u8")
    assert h1.tolist() == words[:, 0].tolist() and h2.tolist() == words[:, 1].tolist()


def test_the_table_grows_to_what_a_pass_can_map_and_never_past_the_budget() -> None:
    m = OffsetMap(24 * 10_000, versioned=False, records=0)
    m.clear(records=100)
    small = m.nbytes
    assert small < 24 * 200
    m.clear(records=150)  # grows by doubling at least
    assert m.nbytes >= 2 * small
    m.clear(records=10)  # kept, not shrunk
    assert m.nbytes >= 2 * small
    m.clear(records=10**9)
    assert m.nbytes <= 24 * 10_000 and m.table.shape[0] == m.slots


def test_a_pass_that_brings_more_records_than_it_said_stops_where_the_table_is_full() -> None:
    m = OffsetMap(24 * 10_000, versioned=False, records=10)
    h1, h2 = hash_keys(pa.array([b"k%d" % i for i in range(100)], pa.binary()))
    mapped = m.put(h1, h2, np.arange(100, dtype=np.int64), None)
    assert 10 <= mapped < 100 and m.size == mapped
    _, off, _ = m.get(h1[:mapped], h2[:mapped])
    assert off.tolist() == list(range(mapped))
