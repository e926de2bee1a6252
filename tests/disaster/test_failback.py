"""Failback's settling of the diverged tail, key by key, against the policy: what the DR site wrote since the
switch goes back through the reverse mirror; a key only the tail changed is kept, or given the DR site's value
back (a tombstone where it has none), and the records written carry the DR site as their origin."""

from __future__ import annotations

import time

import pytest

from streaming.cleaner.config import CompactionConfig, Strategy
from streaming.cleaner.strategy import header_version
from streaming.disaster.failback import Diverged, TailPartition, settle
from streaming.kafka.clients import TopicRecord
from streaming.kafka.headers.offset_header import OFFSET_HEADER
from streaming.kafka.headers.origin_header import ORIGIN_HEADER
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


def _restored_under(config: CompactionConfig, tail_record: TopicRecord, dr_record: TopicRecord | None) -> TopicRecord:
    """What drop writes on the old primary for a key the tail changed last: the DR site's value, or a tombstone."""
    tail = {SOURCE: TailPartition("orders", 0, 10, 11)}
    at_dr = {SINK: {} if dr_record is None else {b"k": dr_record}}
    written: list[TopicRecord] = []
    settle(tail, {SOURCE: {b"k": tail_record}}, at_dr, {SOURCE: SINK}, Diverged.DROP, "DR",
           lambda pid, r: written.append(r), compaction={"orders": config})
    assert len(written) == 1
    return written[0]


def _version(record: TopicRecord, config: CompactionConfig) -> int:
    """The record's version as the compactor ranks it (streaming.cleaner.strategy)."""
    if config.compaction_strategy is Strategy.TIMESTAMP:
        return record.timestamp_ms
    return header_version([{"key": k, "value": v} for k, v in record.headers], config.compaction_strategy_header)[0]


TIMESTAMP = CompactionConfig.from_mapping({"compaction.strategy": "timestamp"})
HEADER = CompactionConfig.from_mapping({"compaction.strategy": "header", "compaction.strategy.header": "v"})
MIRRORED = ((OFFSET_HEADER, b"7"), (ORIGIN_HEADER, b"P"))


@pytest.mark.parametrize("config", [TIMESTAMP, HEADER], ids=["timestamp", "header"])
@pytest.mark.parametrize("at_dr", [True, False], ids=["restored", "tombstoned"])
def test_drop_under_a_version_strategy_writes_a_record_that_outranks_the_tails(config: CompactionConfig,
                                                                              at_dr: bool) -> None:
    """Written after the tail's record, the DR site's value (or the tombstone) must win the key under the
    topic's strategy: with the DR record's older timestamp or version, the tail's newer one would win again in
    any compaction of the old primary (a forward mirror started again), and the DR site would diverge from it."""
    stamped = int(time.time() * 1000) + 600_000  # a producer's clock ahead: later than a tombstone's own time
    tail_record = TopicRecord(b"k", b"tail", (("v", (9).to_bytes(8, "big", signed=True)),), 20, stamped)
    dr_record = TopicRecord(b"k", b"old", (("v", (3).to_bytes(8, "big", signed=True)), *MIRRORED), 7, 123)
    written = _restored_under(config, tail_record, dr_record if at_dr else None)
    assert written.value == (b"old" if at_dr else None)
    assert _version(written, config) >= _version(tail_record, config)


def test_drop_under_the_offset_strategy_keeps_the_dr_records_time_and_headers() -> None:
    tail_record = TopicRecord(b"k", b"tail", (), 20, 5_000)
    dr_record = TopicRecord(b"k", b"old", (("app", b"1"), *MIRRORED), 7, 123)
    written = _restored_under(CompactionConfig(), tail_record, dr_record)
    assert (written.timestamp_ms, written.headers) == (123, (("app", b"1"), (ORIGIN_HEADER, b"DR")))
