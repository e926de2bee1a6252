"""The offset header every sink record carries: written one way, read back as the source offset."""

from __future__ import annotations

from hypothesis import given, strategies as st

from streaming.kafka.sink.dead_letters import sink_headers
from streaming.kafka.headers.offset_header import OFFSET_HEADER, encode, source_offset
from streaming.log import make_record
from tests.kafka_helpers import ORIGINS


def test_source_offset_is_the_last_offset_header() -> None:
    assert source_offset(sink_headers(make_record(41, b"k", b"v", 1, [("h", b"x")]), ORIGINS)) == 41
    assert source_offset([(OFFSET_HEADER, b"3"), ("h", None), (OFFSET_HEADER, b"7")]) == 7
    assert source_offset([("h", b"1")]) is None and source_offset(None) is None


@given(st.integers(min_value=0, max_value=2**63 - 1))
def test_an_offset_is_ascii_decimal_digits_read_back_as_itself(offset: int) -> None:
    value = encode(offset)
    assert value == str(offset).encode("ascii") and source_offset([(OFFSET_HEADER, value)]) == offset
