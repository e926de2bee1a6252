"""A record's headers have one encoding in the log (Avro's array of {key: string, value: null|bytes}) and one
reference reader, columns.header_pairs. The other readers are held to it: the codec's compiled skip
(codec._skip_headers) here, the C extension's through the produce property test
(tests/kafka/native/test_native_paths.py). Avro lets a writer split an array into blocks, a negative count giving the
block's byte size; the log's writer never does, other writers may, and every reader takes both forms."""

from __future__ import annotations

import hypothesis.strategies as st
import numpy as np
from hypothesis import given, settings

from streaming.log import codec
from streaming.log.columns import _varint, encode_headers, header_pairs

HEADERS = st.lists(st.tuples(st.text(max_size=20) | st.just("h" * 200), st.none() | st.binary(max_size=300)),
                   max_size=20)


def in_blocks(headers: list[tuple[str, bytes | None]], sizes: list[int], sized: list[bool]) -> bytes:
    """The headers as Avro blocks of ``sizes`` items each (the rest in a last block), each block with a
    negative count and its byte size where ``sized`` says so."""
    out, at = [], 0
    for i, size in enumerate([*sizes, len(headers)]):
        chunk = headers[at:at + size]
        at += len(chunk)
        if not chunk:
            break
        items = encode_headers(chunk)[len(_varint(len(chunk))):-1]
        with_bytes = i < len(sized) and sized[i]
        out.append(_varint(-len(chunk)) + _varint(len(items)) + items if with_bytes else _varint(len(chunk)) + items)
    return b"".join(out) + b"\x00"


@settings(max_examples=300, deadline=None)
@given(HEADERS, st.lists(st.integers(1, 5), max_size=5), st.lists(st.booleans(), max_size=5), st.binary(max_size=8))
def test_every_reader_takes_the_log_writers_form_and_avros_blocks(headers, sizes, sized, after: bytes) -> None:
    for encoded in (encode_headers(headers), in_blocks(headers, sizes, sized)):
        assert header_pairs(encoded) == headers
        buf = np.frombuffer(encoded + after, dtype=np.uint8)
        assert codec._skip_headers(buf, 0, len(buf)) == len(encoded), "the skip ends where the headers do"
        for cut in range(len(encoded)):
            assert codec._skip_headers(buf, 0, cut) == -1, "a cut short encoding is refused, never read past"
