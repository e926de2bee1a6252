"""The offset map: fixed memory, Kafka-sized entries, correct winners, partial passes when full."""

from __future__ import annotations

import random


import numpy as np
import pyarrow as pa
from hypothesis import example, given, settings
from hypothesis import strategies as st

from streaming.cleaner import CompactionConfig, LogCleanerManager
from streaming.partition_id import PartitionId
from streaming.cleaner import offset_map
from streaming.cleaner.offset_map import OffsetMap
from streaming.log.key_hash import hash_keys
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


_M64 = (1 << 64) - 1


def _sipround(v: list[int]) -> list[int]:
    def rotl(x: int, b: int) -> int:
        return ((x << b) | (x >> (64 - b))) & _M64

    v0, v1, v2, v3 = v
    v0 = (v0 + v1) & _M64
    v1 = rotl(v1, 13) ^ v0
    v0 = rotl(v0, 32)
    v2 = (v2 + v3) & _M64
    v3 = rotl(v3, 16) ^ v2
    v0 = (v0 + v3) & _M64
    v3 = rotl(v3, 21) ^ v0
    v2 = (v2 + v1) & _M64
    v1 = rotl(v1, 17) ^ v2
    v2 = rotl(v2, 32)
    return [v0, v1, v2, v3]


def _siphash128(key: bytes, msg: bytes) -> bytes:
    """SipHash-2-4, 128-bit output, written from the paper and siphash.c, one Python int at a time."""
    k0, k1 = int.from_bytes(key[:8], "little"), int.from_bytes(key[8:], "little")
    v = [k0 ^ 0x736F6D6570736575, k1 ^ 0x646F72616E646F6D ^ 0xEE, k0 ^ 0x6C7967656E657261, k1 ^ 0x7465646279746573]
    whole = len(msg) - len(msg) % 8
    for m in [int.from_bytes(msg[at:at + 8], "little") for at in range(0, whole, 8)] + [
            ((len(msg) & 0xFF) << 56) | int.from_bytes(msg[whole:], "little")]:
        v[3] ^= m
        v = _sipround(_sipround(v))
        v[0] ^= m
    v[2] ^= 0xEE
    for _ in range(4):
        v = _sipround(v)
    first = v[0] ^ v[1] ^ v[2] ^ v[3]
    v[1] ^= 0xDD
    for _ in range(4):
        v = _sipround(v)
    return first.to_bytes(8, "little") + (v[0] ^ v[1] ^ v[2] ^ v[3]).to_bytes(8, "little")


def test_the_reference_siphash_gives_the_papers_vector() -> None:
    assert _siphash128(bytes(range(16)), b"").hex() == "a3817f04ba25a8e66df67214c7550293"  # siphash.c's first


@settings(max_examples=300, deadline=None)
@given(st.lists(st.binary(max_size=200), max_size=40), st.binary(min_size=16, max_size=16))
@example([bytes(range(n)) for n in (0, 1, 7, 8, 9, 15, 16, 17, 63, 64, 65, 200)], bytes(range(16)))  # word edges
def test_key_hashes_are_siphash_2_4_128(keys: list[bytes], key: bytes) -> None:
    h1, h2 = hash_keys(pa.array(keys, pa.binary()), np.frombuffer(key, dtype="<u8"))
    digests = b"".join(_siphash128(key, k) for k in keys)
    words = np.frombuffer(digests, dtype="<u8").reshape(-1, 2) if keys else np.empty((0, 2), dtype="<u8")
    assert h1.tolist() == words[:, 0].tolist() and h2.tolist() == words[:, 1].tolist()


def test_the_process_key_is_its_own() -> None:
    """Hashes under the process's key differ from those under a known key: nobody can aim for a collision."""
    keys = pa.array([b"a", b"b"], pa.binary())
    assert hash_keys(keys)[0].tolist() != hash_keys(keys, np.frombuffer(bytes(range(16)), dtype="<u8"))[0].tolist()


def test_the_table_grows_with_the_keys_mapped_and_never_past_the_budget() -> None:
    """Many records of few keys keep the table small, however many records the pass said it may map."""
    m = OffsetMap(24 * 100_000, versioned=False, records=0)
    first = m.nbytes
    m.clear(records=50_000)
    assert m.nbytes == first, "clear() allocates nothing"
    keys = pa.array([b"k%d" % (i % 3_000) for i in range(50_000)], pa.binary())
    h1, h2 = hash_keys(keys)
    assert m.put(h1, h2, np.arange(50_000, dtype=np.int64), None) == 50_000 and m.size == 3_000
    assert m.nbytes <= 24 * 4 * 3_000, "grown at half full, to twice the keys at most"
    _, off, _ = m.get(h1[-3_000:], h2[-3_000:])
    assert off.tolist() == list(range(47_000, 50_000)), "every winner kept across the growths"
    m.clear(records=10)  # kept, not shrunk
    assert m.nbytes >= 24 * 3_000
    m.clear(records=10**9)
    many = pa.array([b"n%d" % i for i in range(200_000)], pa.binary())
    mapped = m.put(*hash_keys(many), np.arange(200_000, dtype=np.int64), None)
    assert mapped == m.max_entries and m.nbytes <= 24 * 100_000 and m.table.shape[0] == m.slots


def test_a_pass_that_brings_more_records_than_it_said_stops_where_the_table_is_full() -> None:
    """Said 10 records: the table is the first one (it never grows past what the pass said, nor shrinks)."""
    m = OffsetMap(24 * 10_000, versioned=False, records=10)
    h1, h2 = hash_keys(pa.array([b"k%d" % i for i in range(10_000)], pa.binary()))
    mapped = m.put(h1, h2, np.arange(10_000, dtype=np.int64), None)
    assert 10 <= mapped < 10_000 and m.size == mapped and m.table.shape[0] == offset_map.FIRST_SLOTS
    _, off, _ = m.get(h1[:mapped], h2[:mapped])
    assert off.tolist() == list(range(mapped))
