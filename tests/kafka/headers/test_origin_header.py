"""Where a record came from (kcompact.origin): its own first origin header with a value, else the job's source
cluster; and a record that came from the sink's cluster is looped, found among a log batch's encoded headers as
the record-by-record rule finds it."""

from __future__ import annotations

from hypothesis import given, strategies as st

from streaming.kafka.headers.origin_header import ORIGIN_HEADER, Origins
from streaming.log import batch_from_records, make_record

MIRROR = Origins("cluster-a", "cluster-b")


def test_a_record_keeps_the_origin_it_carries_else_names_the_source() -> None:
    assert MIRROR.origin_of([("h", b"x")]) == b"cluster-a" and MIRROR.origin_of(None) == b"cluster-a"
    assert MIRROR.origin_of([(ORIGIN_HEADER, b"cluster-c"), (ORIGIN_HEADER, b"cluster-b")]) == b"cluster-c", \
        "mirrored twice: the first origin"
    assert MIRROR.origin_of([(ORIGIN_HEADER, None), (ORIGIN_HEADER, b"cluster-c")]) == b"cluster-c", \
        "a null value names nothing"


def test_the_origin_header_is_added_only_to_a_record_without_one() -> None:
    assert MIRROR.sink_headers([("h", b"x")]) == [("h", b"x"), (ORIGIN_HEADER, b"cluster-a")]
    assert MIRROR.sink_headers([(ORIGIN_HEADER, b"cluster-c")]) == [(ORIGIN_HEADER, b"cluster-c")]
    assert MIRROR.sink_headers([(ORIGIN_HEADER, None)]) == [(ORIGIN_HEADER, None), (ORIGIN_HEADER, b"cluster-a")]


def test_a_record_from_the_sinks_cluster_is_looped_and_only_that_one() -> None:
    assert MIRROR.looped([(ORIGIN_HEADER, b"cluster-b")])
    assert not MIRROR.looped([(ORIGIN_HEADER, b"cluster-c"), (ORIGIN_HEADER, b"cluster-b")])
    assert not MIRROR.looped([("h", b"cluster-b")]) and not MIRROR.looped([])


def test_a_job_within_one_cluster_leaves_nothing_out() -> None:
    within = Origins("cluster-a", "cluster-a")
    batch = batch_from_records([make_record(0, b"k", b"v", 1, [(ORIGIN_HEADER, b"cluster-a")]),
                                make_record(1, b"k", b"v", 1, [])])
    assert not within.looped([]) and not within.looped([(ORIGIN_HEADER, b"cluster-a")])
    assert within.looped_rows(batch.column("headers")).size == 0


_names = st.sampled_from([ORIGIN_HEADER, "h", "kcompact.offset", "cluster-b"])
_values = st.none() | st.sampled_from([b"cluster-a", b"cluster-b", b"cluster-bb", b"x-cluster-b", b""])
_headers = st.lists(st.tuples(_names, _values), max_size=5)


@given(st.lists(_headers, max_size=30))
def test_looped_rows_of_a_batch_are_the_records_the_rule_finds_looped(headers) -> None:
    batch = batch_from_records([make_record(i, b"k", b"v", 1, h) for i, h in enumerate(headers)])
    want = [i for i, h in enumerate(headers) if MIRROR.looped(h)]
    assert MIRROR.looped_rows(batch.column("headers")).tolist() == want
