"""Failback's settling of the diverged tail, key by key, against the policy: what the DR site wrote since the
switch goes back through the reverse mirror; a key only the tail changed is kept, or given the DR site's value
back (a tombstone where it has none), and the records written carry the DR site as their origin."""

from __future__ import annotations

import pytest

from streaming.disaster.failback import Diverged, TailPartition, settle
from streaming.kafka.clients import TopicRecord
from streaming.kafka.offset_header import OFFSET_HEADER
from streaming.kafka.origin_header import ORIGIN_HEADER
from streaming.partition_id import PartitionId

SOURCE, SINK = PartitionId("orders", 0), PartitionId("orders", 0)


def _settled(policy: Diverged) -> tuple[TailPartition, list[TopicRecord]]:
    tail = {SOURCE: TailPartition("orders", 0, 10, 14)}
    latest = {SOURCE: {b"dr-wrote": TopicRecord(b"dr-wrote", b"t1"), b"mirrored": TopicRecord(b"mirrored", b"t2"),
                       b"nowhere": TopicRecord(b"nowhere", b"t3")}}
    at_dr = {SINK: {b"dr-wrote": TopicRecord(b"dr-wrote", b"dr", ()),
                    b"mirrored": TopicRecord(b"mirrored", b"old", ((OFFSET_HEADER, b"7"), (ORIGIN_HEADER, b"P"),
                                                                   ("app", b"1")), 7, 123)}}
    written: list[TopicRecord] = []
    settle(tail, latest, at_dr, {SOURCE: SINK}, policy, "DR", lambda pid, r: written.append(r))
    return tail[SOURCE], written


def test_drop_gives_the_dr_sites_value_back_and_deletes_what_it_never_had() -> None:
    tail, written = _settled(Diverged.DROP)
    assert (tail.written_at_dr, tail.restored, tail.tombstoned, tail.kept) == (1, 1, 1, 0)
    assert tail.tail_only_keys == ["dr-wrote", "mirrored", "nowhere"]
    restored, tombstone = sorted(written, key=lambda r: r.key)
    assert (restored.key, restored.value, restored.timestamp_ms) == (b"mirrored", b"old", 123)
    assert restored.headers == (("app", b"1"), (ORIGIN_HEADER, b"DR"))  # the forward mirror's headers go
    assert (tombstone.key, tombstone.value, tombstone.headers) == (b"nowhere", None, ((ORIGIN_HEADER, b"DR"),))


@pytest.mark.parametrize("policy", list(Diverged))
def test_a_key_the_dr_site_wrote_is_left_to_the_reverse_mirror(policy: Diverged) -> None:
    _, written = _settled(policy)
    assert b"dr-wrote" not in {r.key for r in written}


def test_keep_writes_nothing() -> None:
    tail, written = _settled(Diverged.KEEP)
    assert (tail.written_at_dr, tail.kept, written) == (1, 2, [])
