"""The erase audit's entries, from a log and a cleaner run by hand: the times agree with the passes that
made them true, a key written again ends its entry, and a crash between a change and its commit leaves
neither the change nor its event."""

from __future__ import annotations

import functools
import hashlib
import json

import pytest

from streaming.cleaner import CompactionConfig, LogCleanerManager
from streaming.erasure import events as audit
from streaming.erasure.entries import deadline_ms, fold
from streaming.erasure.events import AuditKeys
from streaming.log import PartitionLog, make_record
from streaming.log.journal import journal_dir
from streaming.partition_id import PartitionId
from streaming.configuration.settings import LONG_MAX

PID = PartitionId("t", 0)


def cfg(**kv) -> CompactionConfig:
    return CompactionConfig.from_mapping({k.replace("_", "."): str(v) for k, v in
                                          {"min_cleanable_dirty_ratio": 0, **kv}.items()})


def append(plog: PartitionLog, records: list[tuple[int, bytes, bytes | None, int]], now_ms: int,
           keys: AuditKeys = AuditKeys.HASH) -> None:
    plog.append([make_record(o, k, v, ts) for o, k, v, ts in records], now_ms,
                functools.partial(audit.ingested, now_ms=now_ms, keys=keys))


def entries(plog: PartitionLog):
    return {e.offset: e for e in fold(PID, plog.journal())}


def test_a_tombstone_is_followed_from_ingest_to_its_removal(tmp_path) -> None:
    c = cfg(delete_retention_ms=1000)
    plog = PartitionLog(str(tmp_path), c.log_config)
    append(plog, [(0, b"a", b"1", 100), (1, b"b", b"1", 110), (2, b"a", None, 120)], now_ms=500)
    plog.roll()
    manager = LogCleanerManager(c)
    first = manager.clean_partition(PID, plog, now_ms=10_000)
    [e] = entries(plog).values()
    assert (e.offset, e.timestamp_ms, e.ingested_ms) == (2, 120, 500)
    assert e.key_sha256 == hashlib.sha256(b"a").hexdigest() and e.key is None
    assert (e.erased_ms, e.delete_horizon_ms) == (first.result.now_ms, 11_000) and e.state == "erased from the log"
    assert e.log_latency_ms() == 10_000 - 120
    assert [r["offset"] for r in plog.read()] == [1, 2], "the pass that says 'erased' removed offset 0"
    plog.note([audit.Emitted(2, 10_500, 7)], {"emitted_through": 2})
    assert entries(plog)[2].state == "in the sink" and entries(plog)[2].sink_offset == 7
    manager.clean_partition(PID, plog, now_ms=11_000)
    e = entries(plog)[2]
    assert e.removed_ms == 11_000 and e.state == "done" and e.sink_latency_ms() == 10_500 - 120
    assert [r["offset"] for r in plog.read()] == [1]


def test_a_tombstone_the_sink_has_not_committed_is_held_past_its_horizon_and_the_audit_says_so(tmp_path) -> None:
    c = cfg(delete_retention_ms=1000)
    plog = PartitionLog(str(tmp_path), c.log_config)
    append(plog, [(0, b"a", b"1", 100), (1, b"a", None, 120)], now_ms=500)
    plog.roll()
    manager = LogCleanerManager(c)
    manager.clean_partition(PID, plog, now_ms=10_000, emitted_up_to=-1)
    manager.clean_partition(PID, plog, now_ms=12_000, emitted_up_to=-1)
    e = entries(plog)[1]
    assert e.removed_ms is None and [r["offset"] for r in plog.read()] == [1], "held: the sink has not got it"
    assert (e.held_for_sink_ms(10_999), e.held_for_sink_ms(12_000)) == (None, 1000)
    assert e.overdue(12_000, 1000) == "not in the sink yet"
    plog.note([audit.Emitted(1, 12_500, 0)], {"emitted_through": 1})
    manager.clean_partition(PID, plog, now_ms=13_000, emitted_up_to=1)
    e = entries(plog)[1]
    assert e.state == "done" and e.removed_ms == 13_000 and e.held_for_sink_ms(13_000) is None


def test_a_key_written_again_after_its_tombstone_ends_the_entry(tmp_path) -> None:
    c = cfg()
    plog = PartitionLog(str(tmp_path), c.log_config)
    manager = LogCleanerManager(c)
    append(plog, [(0, b"a", b"1", 0), (1, b"a", None, 1)], now_ms=10)
    plog.roll()
    manager.clean_partition(PID, plog, now_ms=100)
    append(plog, [(2, b"a", b"2", 2)], now_ms=200)
    plog.roll()
    manager.clean_partition(PID, plog, now_ms=300)
    e = entries(plog)[1]
    assert (e.erased_ms, e.superseded_ms, e.superseded_by) == (100, 300, 2)
    assert e.state == "key written again" and e.overdue(10**12, 1) is None


def test_a_tombstone_replaced_by_a_later_tombstone_says_so(tmp_path) -> None:
    c = cfg()
    plog = PartitionLog(str(tmp_path), c.log_config)
    append(plog, [(0, b"a", b"1", 0), (1, b"a", None, 1), (2, b"a", None, 2)], now_ms=10)
    plog.roll()
    LogCleanerManager(c).clean_partition(PID, plog, now_ms=100)
    found = entries(plog)
    assert found[1].state == "replaced by a later tombstone" and found[1].superseded_by == 2
    assert found[2].state == "erased from the log" and found[2].erased_ms == 100


def test_keys_are_kept_only_when_asked_and_not_at_all_when_off(tmp_path) -> None:
    plog = PartitionLog(str(tmp_path / "key"), cfg().log_config)
    append(plog, [(0, b"k\x00", None, 0)], now_ms=1, keys=AuditKeys.KEY)
    assert entries(plog)[0].key == "awA=" and entries(plog)[0].key_sha256 is None
    off = PartitionLog(str(tmp_path / "off"), cfg().log_config)
    append(off, [(0, b"k", None, 0)], now_ms=1, keys=AuditKeys.OFF)
    assert off.journal() == [] and off.journal_head is None


def test_a_replayed_append_says_nothing_twice(tmp_path) -> None:
    plog = PartitionLog(str(tmp_path), cfg().log_config)
    append(plog, [(0, b"a", None, 0), (1, b"b", None, 0)], now_ms=1)
    append(plog, [(0, b"a", None, 0), (1, b"b", None, 0), (2, b"c", None, 0)], now_ms=2)
    assert [(e["offset"], e["at"]) for e in plog.journal()] == [(0, 1), (1, 1), (2, 2)]


def test_an_append_cut_short_before_its_manifest_leaves_no_event(tmp_path, monkeypatch) -> None:
    """A crash between the journal object and the manifest: the object is there, but no manifest names
    it, so neither a reader nor the next writer (which appends the records again) sees it twice."""
    plog = PartitionLog(str(tmp_path), cfg().log_config)
    append(plog, [(0, b"a", None, 0)], now_ms=1)

    def crash(*_a, **_k):
        raise OSError("killed")

    monkeypatch.setattr("streaming.log.partition_log.commit", crash)
    with pytest.raises(OSError):
        append(plog, [(1, b"b", None, 0)], now_ms=2)
    monkeypatch.undo()
    assert len(list((tmp_path / journal_dir("")).iterdir())) == 2, "the stray object is there"
    again = PartitionLog(str(tmp_path), cfg().log_config)
    assert [e["offset"] for e in again.journal()] == [0]
    append(again, [(1, b"b", None, 0)], now_ms=3)
    assert [(e["offset"], e["at"]) for e in again.journal()] == [(0, 1), (1, 3)]


def test_overdue_is_held_to_max_compaction_lag_plus_one_trigger() -> None:
    [e] = fold(PID, [{"e": "ingested", "offset": 5, "timestamp": 1000, "at": 1000, "key_sha256": "x"}])
    bound = deadline_ms(60_000, 5_000)
    assert e.overdue(1000 + bound, bound) is None
    assert e.overdue(1001 + bound, bound) == "earlier records still in the log"
    [e] = fold(PID, [{"e": "ingested", "offset": 5, "timestamp": 1000, "at": 1000, "key_sha256": "x"},
                     {"e": "erased", "offset": 5, "timestamp": 1000, "at": 2000, "delete_horizon_ms": 9}])
    assert e.overdue(10**9, bound) == "not in the sink yet"
    assert deadline_ms(LONG_MAX, 5_000) == LONG_MAX and e.overdue(10**15, LONG_MAX) is None


@pytest.mark.parametrize("event,doc", [
    (audit.Ingested(3, 10, 9, key_sha256="ab"), {"e": "ingested", "offset": 3, "at": 10, "timestamp": 9, "key_sha256": "ab"}),
    (audit.Ingested(3, 10, 9, key="YQ=="), {"e": "ingested", "offset": 3, "at": 10, "timestamp": 9, "key": "YQ=="}),
    (audit.Erased(3, 11, 9, 99), {"e": "erased", "offset": 3, "at": 11, "timestamp": 9, "delete_horizon_ms": 99}),
    (audit.Superseded(3, 12, 5), {"e": "superseded", "offset": 3, "at": 12, "by": 5}),
    (audit.Removed(3, 13), {"e": "removed", "offset": 3, "at": 13}),
    (audit.Emitted(3, 14, 7), {"e": "emitted", "offset": 3, "at": 14, "sink_offset": 7}),
    (audit.Emitted(3, 14, None, recovered=True), {"e": "emitted", "offset": 3, "at": 14, "sink_offset": None,
                                                 "recovered": True})])
def test_each_event_is_the_journal_object_it_always_was_and_reads_back_as_itself(event: audit.AuditEvent,
                                                                                 doc: dict) -> None:
    assert event.to_doc() == doc
    assert audit.AuditEvent.from_doc(json.loads(json.dumps(doc))) == event
