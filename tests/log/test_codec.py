"""The compiled codec writes exactly fastavro's bytes for the log schema, and reads them back."""

from __future__ import annotations

import io
import os

import fastavro
import hypothesis.strategies as st
import numpy as np
import pytest
from hypothesis import given, settings

from streaming.log import batch_from_records, decode_headers, encode_headers, records_from_batch
from streaming.log.columns import DecodeError, decode_batch, encode_batch
from streaming.log.record import parsed_schema
from streaming.log.segment import container_header, object_body

LONGS = st.integers(-(2**63), 2**63 - 1)
BLOBS = st.none() | st.binary(max_size=300)
HEADERS = st.lists(st.fixed_dictionaries({"key": st.text(max_size=20), "value": BLOBS}), max_size=4)
RECORDS = st.lists(st.fixed_dictionaries({
    "offset": LONGS, "timestamp": LONGS, "timestamp_type": st.integers(-(2**31), 2**31 - 1), "key": BLOBS,
    "value": BLOBS, "headers": HEADERS, "delete_horizon_ms": st.none() | LONGS}), max_size=60)


def fastavro_bytes(records: list[dict]) -> bytes:
    out = io.BytesIO()
    for r in records:
        fastavro.schemaless_writer(out, parsed_schema(), r)
    return out.getvalue()


def fastavro_long(n: int) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, "long", n)
    return out.getvalue()


@settings(max_examples=300, deadline=None)
@given(RECORDS)
def test_encoding_is_byte_for_byte_fastavros(records: list[dict]) -> None:
    sync = os.urandom(16)
    body = encode_batch(batch_from_records(records), sync, len(records) + 1, 1 << 30).tobytes()
    payload = fastavro_bytes(records)
    assert body == (fastavro_long(len(records)) + fastavro_long(len(payload)) + payload + sync if records else b"")


@settings(max_examples=200, deadline=None)
@given(RECORDS, st.integers(1, 7), st.integers(1, 400))
def test_blocks_read_back_with_fastavro_and_with_the_codec(records: list[dict], per_block: int, block_bytes: int) -> None:
    header = container_header(metadata={"kcompact.base_offset": "0"})
    sync = header[-16:]
    body = encode_batch(batch_from_records(records), sync, per_block, block_bytes).tobytes()
    assert list(fastavro.reader(io.BytesIO(header + body))) == records
    for block in fastavro.block_reader(io.BytesIO(header + body)):
        assert 1 <= block.num_records <= per_block
        assert block.num_records == 1 or len(block.bytes_.getvalue()) <= block_bytes
    batch, used = decode_batch(np.frombuffer(body, dtype=np.uint8), 0, len(body), sync)
    assert used == len(body)
    assert records_from_batch(batch) == records


@given(HEADERS)
def test_headers_encoding_roundtrips_as_fastavro_writes_it(headers: list[dict]) -> None:
    encoded = encode_headers(headers)
    record = {"offset": 0, "timestamp": 0, "timestamp_type": 0, "key": None, "value": None, "headers": headers,
              "delete_horizon_ms": None}
    assert fastavro_bytes([record]) == b"\x00" * 5 + encoded + b"\x00"
    assert decode_headers(encoded) == headers


def test_a_partial_last_block_is_left_for_the_next_read() -> None:
    records = [{"offset": i, "timestamp": i, "timestamp_type": 0, "key": b"k", "value": os.urandom(50),
                "headers": [], "delete_horizon_ms": None} for i in range(10)]
    sync = os.urandom(16)
    body = object_body(batch_from_records(records), sync)
    cut = body[:-5]
    batch, used = decode_batch(np.frombuffer(cut, dtype=np.uint8), 0, len(cut), sync)
    assert batch.num_rows == 0 and used == 0


@pytest.mark.parametrize("damage, message", [("sync", "sync marker"), ("size", "stated size")])
def test_damaged_framing_is_named(damage: str, message: str) -> None:
    records = [{"offset": i, "timestamp": i, "timestamp_type": 0, "key": b"k", "value": b"v" * 10,
                "headers": [], "delete_horizon_ms": None} for i in range(3)]
    sync = os.urandom(16)
    body = bytearray(object_body(batch_from_records(records), sync))
    if damage == "sync":
        body[-1] ^= 0xFF
    else:
        body[1] += 2  # the block's byte count (one varint byte here) claims one more byte than its records use
        body += b"\x00"
    with pytest.raises(DecodeError, match=message):
        decode_batch(np.frombuffer(bytes(body), dtype=np.uint8), 0, len(body), sync)
