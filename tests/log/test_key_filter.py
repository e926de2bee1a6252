"""A segment's key filter never misses a key it holds, claims almost none it does not, and stops at MAX_KEYS."""

from __future__ import annotations

import io
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streaming.configuration.settings import LONG_MAX
from streaming.log import batch_from_records, key_filter, make_record
from streaming.log.segment import SegmentMeta
from streaming.log.segment_writer import write_cleaned


def _prints(keys: list[bytes]):
    return key_filter.fingerprints(pa.array(keys, pa.binary()))


@settings(deadline=None)  # the first example compiles the hash
@given(st.lists(st.binary(max_size=24), min_size=1, max_size=300, unique=True), st.data())
def test_a_filter_holds_every_key_it_was_built_from(keys: list[bytes], data) -> None:
    built = key_filter.build(_prints(keys))
    asked = data.draw(st.lists(st.sampled_from(keys), min_size=1, max_size=5))
    assert key_filter.holds_any(built, key_filter.asked(_prints(asked)))


def test_a_full_filter_claims_almost_no_absent_key() -> None:
    """About MAX_KEYS / 2^32 of absent keys: a pass of many new keys over many clean segments reads none of them
    for nothing (a Bloom filter of 10 bits a key claimed 2%)."""
    built = key_filter.build(_prints([b"in-%d" % i for i in range(key_filter.MAX_KEYS)]))
    absent = _prints([b"out-%d" % i for i in range(200_000)])
    assert sum(key_filter.holds_any(built, key_filter.asked(absent[i:i + 1000]))
               for i in range(0, len(absent), 1000)) <= 2


def test_no_key_asked_is_none_held() -> None:
    assert not key_filter.holds_any(key_filter.build(_prints([b"a"])), key_filter.asked(_prints([])))
    assert not key_filter.holds_any(key_filter.build(_prints([])), key_filter.asked(_prints([b"a"])))


def test_a_segment_of_more_keys_than_max_keys_has_no_filter() -> None:
    keys = [b"%d" % i for i in range(key_filter.MAX_KEYS + 1)]
    assert key_filter.build(_prints(keys)) is None
    assert key_filter.build(_prints(keys[:-1])) is not None
    builder = key_filter.FilterBuilder()
    builder.add(_prints(keys[:10]))
    builder.add(_prints(keys[10:]))
    assert not builder.wants and builder.build() is None


def test_the_fingerprints_are_the_same_in_another_process() -> None:
    """The filter outlives the process that built it: its hash key is fixed, unlike the offset map's."""
    code = ("import pyarrow as pa; from streaming.log import key_filter; "
            "print(int(key_filter.fingerprints(pa.array([b'key'], pa.binary()))[0]))")
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert int(other) == int(_prints([b"key"])[0])


@pytest.mark.parametrize("horizon", [None, 5_000])
def test_a_cleaned_segment_has_a_filter_unless_a_tombstone_awaits_its_horizon(horizon: int | None) -> None:
    """Such a tombstone (kept past a pass's end) must get its horizon from a later pass, which must read it."""
    batch = batch_from_records([make_record(0, b"a", b"1", 0), {**make_record(1, b"b", None, 0),
                                                                  "delete_horizon_ms": horizon}])
    new = SegmentMeta.new(0, 2, clean=True)
    write_cleaned(io.BytesIO(), new, [batch], 0, LONG_MAX)
    assert (new.key_filter is None) == (horizon is None)
    if horizon is not None:
        assert key_filter.holds_any(new.key_filter, key_filter.asked(_prints([b"a", b"b"])))


def test_a_segment_that_takes_more_records_forgets_its_filter() -> None:
    seg = SegmentMeta.new(0)
    seg.key_filter = key_filter.build(_prints([b"a"]))
    batch = batch_from_records([make_record(0, b"b", b"1", 0)])
    seg.observe(batch, np.ones(1, np.int64), np.zeros(1, np.int64))
    assert seg.key_filter is None
