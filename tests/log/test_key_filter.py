"""A segment's key filter never misses a key it holds, claims few it does not, and stops at MAX_KEYS."""

from __future__ import annotations

import subprocess
import sys

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from streaming.log import key_filter


def _prints(keys: list[bytes]):
    return key_filter.fingerprints(pa.array(keys, pa.binary()))


@settings(deadline=None)  # the first example compiles the filter's loops
@given(st.lists(st.binary(max_size=24), min_size=1, max_size=300, unique=True), st.data())
def test_a_filter_holds_every_key_it_was_built_from(keys: list[bytes], data) -> None:
    built = key_filter.build(*_prints(keys))
    asked = data.draw(st.lists(st.sampled_from(keys), min_size=1, max_size=5))
    assert key_filter.holds_any(built, *_prints(asked))


def test_a_filter_claims_about_one_absent_key_in_a_hundred() -> None:
    built = key_filter.build(*_prints([b"in-%d" % i for i in range(2000)]))
    claimed = sum(key_filter.holds_any(built, *_prints([b"out-%d" % i])) for i in range(20_000))
    assert claimed < 20_000 * 0.03


def test_no_key_asked_is_none_held() -> None:
    assert not key_filter.holds_any(key_filter.build(*_prints([b"a"])), *_prints([]))


def test_a_segment_of_more_keys_than_max_keys_has_no_filter() -> None:
    keys = [b"%d" % i for i in range(key_filter.MAX_KEYS + 1)]
    assert key_filter.build(*_prints(keys)) is None
    assert key_filter.build(*_prints(keys[:-1])) is not None


def test_the_fingerprints_are_the_same_in_another_process() -> None:
    """The filter outlives the process that built it: its hash key is fixed, unlike the offset map's."""
    code = ("import pyarrow as pa; from streaming.log import key_filter; "
            "print(*(int(h[0]) for h in key_filter.fingerprints(pa.array([b'key'], pa.binary()))))")
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert [int(h) for h in other] == [int(h[0]) for h in _prints([b"key"])]
