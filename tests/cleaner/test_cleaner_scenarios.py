"""Scenarios after Kafka's LogCleanerTest and LogCleanerManagerTest, plus the KIP-280 strategy rules."""

from __future__ import annotations

import errno

import pytest

from streaming.cleaner import (Cleaner, CleanerMetrics, CleanResult, CompactionConfig, KeylessRecordError,
                               LogCleanerManager, PartitionFigures)
from streaming.cleaner.cleaner import DeadLetterFenced
from streaming.cleaner.partition_state import PartitionCleanerState
from streaming.partition_id import PartitionId
from streaming.cleaner.throttle import Throttler
from streaming.log import PartitionLog, make_record
from streaming.log.segment import segment_name
from tests.log.objects import segment_object

PID = PartitionId("t", 0)
HOUR = 3_600_000


def cfg(**kv) -> CompactionConfig:
    return CompactionConfig.from_mapping({k.replace("_", "."): str(v) for k, v in kv.items()})


def new_log(path, config: CompactionConfig) -> PartitionLog:
    return PartitionLog(str(path), config.log_config, jitter_seed="t-0")


def rec(offset: int, key: bytes | None, value: bytes | None, ts: int = 0, headers=None) -> dict:
    return make_record(offset, key, value, ts, headers)


def metrics(outcomes, now_ms: int, last_run_ms: int | None = None,
            previous: CleanerMetrics | None = None) -> CleanerMetrics:
    """The metrics of these clean_partition outcomes, built as the job's stage builds them."""
    figures = [PartitionFigures().observed(o.target, o.state) for o in outcomes]
    figures = [f if o.result is None else f.with_pass(o.result) for f, o in zip(figures, outcomes, strict=True)]
    return CleanerMetrics.of(figures, now_ms, last_run_ms, previous)


def survivors(plog: PartitionLog, result: CleanResult) -> list:
    """The records of the pass's newly cleaned range that survived, in offset order."""
    return list(plog.read(result.start_offset, result.end_offset))


def contents(plog: PartitionLog) -> list[tuple[int, bytes | None, bytes | None]]:
    return [(r["offset"], r["key"], r["value"]) for r in plog.read()]


def test_tombstone_needs_two_passes_and_goes_at_its_horizon(tmp_path) -> None:
    c = cfg(delete_retention_ms=1000, min_cleanable_dirty_ratio=0)
    plog = new_log(tmp_path, c)
    plog.append([rec(0, b"a", b"1"), rec(1, b"b", b"1"), rec(2, b"a", None)])
    plog.roll()
    mgr = LogCleanerManager(c)
    first = mgr.clean_partition(PID, plog, now_ms=10_000)
    assert [(r["offset"], r["delete_horizon_ms"]) for r in survivors(plog, first.result)] == [(1, None), (2, 11_000)]
    assert contents(plog) == [(1, b"b", b"1"), (2, b"a", None)], "the first pass keeps the tombstone"
    early = mgr.clean_partition(PID, plog, now_ms=10_999)
    assert early.result is None and not early.target.tombstones_due
    assert (2, b"a", None) in contents(plog)
    due = mgr.clean_partition(PID, plog, now_ms=11_000)
    assert due.target.tombstones_due and due.result.tombstones_removed == 1
    assert contents(plog) == [(1, b"b", b"1")]
    assert plog.log_end_offset == 3


def test_a_tombstone_past_its_horizon_stays_until_the_sink_has_it(tmp_path) -> None:
    """Emission stalled past delete.retention.ms: the pass keeps every tombstone the sink has not committed,
    and removes it at the first pass after the sink has it."""
    c = cfg(delete_retention_ms=1, min_cleanable_dirty_ratio=0)
    plog = new_log(tmp_path, c)
    plog.append([rec(0, b"a", b"1"), rec(1, b"a", None), rec(2, b"b", b"1"), rec(3, b"b", None)])
    plog.roll()
    mgr = LogCleanerManager(c)
    mgr.clean_partition(PID, plog, now_ms=10_000, emitted_up_to=-1)
    stalled = mgr.clean_partition(PID, plog, now_ms=20_000, emitted_up_to=-1)
    assert stalled.target.tombstones_due and stalled.result.tombstones_removed == 0
    assert contents(plog) == [(1, b"a", None), (3, b"b", None)], "nothing of them reached the sink"
    partly = mgr.clean_partition(PID, plog, now_ms=30_000, emitted_up_to=1)
    assert partly.result.tombstones_removed == 1 and contents(plog) == [(3, b"b", None)]
    mgr.clean_partition(PID, plog, now_ms=40_000, emitted_up_to=3)
    assert contents(plog) == []


def test_horizon_counts_from_clean_time_not_record_time(tmp_path) -> None:
    c = cfg(delete_retention_ms=HOUR, min_cleanable_dirty_ratio=0)
    plog = new_log(tmp_path, c)
    plog.append([rec(0, b"a", b"1", ts=0), rec(1, b"a", None, ts=5)])
    plog.roll()
    now = 1_000 * HOUR
    Cleaner(c).clean(plog, LogCleanerManager(c).select(plog, PID, now), now)
    assert [r["delete_horizon_ms"] for r in plog.read()] == [now + HOUR]


def test_min_lag_leaves_young_segments_untouched(tmp_path) -> None:
    c = cfg(min_compaction_lag_ms=HOUR, min_cleanable_dirty_ratio=0, segment_ms=HOUR * 24)
    plog = new_log(tmp_path, c)
    now = 100 * HOUR
    plog.append([rec(0, b"a", b"old", ts=now - 2 * HOUR), rec(1, b"a", b"old2", ts=now - 2 * HOUR)])
    plog.roll()
    plog.append([rec(2, b"a", b"young", ts=now - 10), rec(3, b"a", b"young2", ts=now - 5)])
    plog.roll()
    target = LogCleanerManager(c).select(plog, PID, now)
    assert target.first_uncleanable_offset == 2
    result = Cleaner(c).clean(plog, target, now)
    assert [r["offset"] for r in survivors(plog, result)] == [1]
    assert contents(plog) == [(1, b"a", b"old2"), (2, b"a", b"young"), (3, b"a", b"young2")]


def test_a_rewrite_keeps_a_timeless_record_as_old_as_it_was(tmp_path) -> None:
    c = cfg(min_compaction_lag_ms=HOUR, min_cleanable_dirty_ratio=0)
    plog = new_log(tmp_path, c)
    written = 100 * HOUR
    plog.append([rec(0, b"a", b"1", ts=written), rec(1, b"b", b"1", ts=-1), rec(2, b"a", b"2", ts=written)],
                now_ms=written)
    plog.roll()
    later = written + 5 * HOUR
    Cleaner(c).clean(plog, LogCleanerManager(c).select(plog, PID, later), later)
    assert contents(plog) == [(1, b"b", b"1"), (2, b"a", b"2")]
    assert plog.segments[0].largest_timestamp == written, "the record without a timestamp was written then"
    plog.append([rec(3, b"b", b"2", ts=later)], now_ms=later)
    plog.roll()
    target = LogCleanerManager(c).select(plog, PID, later + 2 * HOUR)
    assert target.first_uncleanable_offset == 4, "a rewrite did not make the old segment young again"


def test_a_segment_whose_dirty_part_is_too_young_has_no_cleanable_bytes(tmp_path) -> None:
    c = cfg(min_compaction_lag_ms=HOUR, min_cleanable_dirty_ratio=0, log_cleaner_dedupe_buffer_size=48)
    plog = new_log(tmp_path, c)
    now = 100 * HOUR
    plog.append([rec(0, b"a", b"1", ts=now - 2 * HOUR), rec(1, b"a", b"2", ts=now - 2 * HOUR),
                 rec(2, b"b", b"1", ts=now - 2 * HOUR)])
    plog.roll()
    mgr = LogCleanerManager(c)
    assert mgr.clean_partition(PID, plog, now_ms=now).result.end_offset == 2, "a one-key map ends the pass inside"
    back = now - 3 * HOUR  # the clock went back: the straddling segment's records are young again
    target = mgr.select(plog, PID, back)
    assert (target.first_dirty_offset, target.first_uncleanable_offset) == (2, 2)
    assert target.cleanable_bytes == 0 and not target.eligible(0.0)


def test_max_lag_forces_a_clean_below_the_dirty_ratio(tmp_path) -> None:
    c = cfg(min_cleanable_dirty_ratio=0.99, max_compaction_lag_ms=HOUR)
    plog = new_log(tmp_path, c)
    plog.append([rec(i, b"k%d" % i, b"v", ts=0) for i in range(50)])
    plog.roll()
    mgr = LogCleanerManager(c)
    mgr.clean_partition(PID, plog, now_ms=2 * HOUR)  # everything clean now
    plog.append([rec(50, b"k0", b"new", ts=10 * HOUR)])
    plog.roll()
    not_yet = mgr.select(plog, PID, now_ms=11 * HOUR)
    assert not_yet.cleanable_ratio < 0.99 and not not_yet.needs_compaction_now
    assert not not_yet.eligible(c.min_cleanable_dirty_ratio)
    late = mgr.clean_partition(PID, plog, now_ms=11 * HOUR + 1)
    assert late.target.needs_compaction_now and late.result is not None
    assert metrics([late], 11 * HOUR + 1).max_compaction_delay_secs == pytest.approx(0.001)
    assert (0, b"k0", b"v") not in contents(plog) and (50, b"k0", b"new") in contents(plog)


@pytest.mark.parametrize("checkpoint", [-5, 10_000])
def test_checkpoint_outside_the_log_resets_to_log_start(tmp_path, checkpoint: int) -> None:
    c = cfg(min_cleanable_dirty_ratio=0)
    plog = new_log(tmp_path, c)
    plog.append([rec(i + 100, b"k", b"v") for i in range(5)])
    plog.roll()
    plog.set_cleaner_checkpoint(checkpoint)
    target = LogCleanerManager(c).select(plog, PID, 0)
    assert target.first_dirty_offset == plog.log_start_offset


def test_recopy_groups_segments_up_to_segment_bytes(tmp_path) -> None:
    c = cfg(min_cleanable_dirty_ratio=0, segment_bytes=900)
    plog = new_log(tmp_path, c)
    for i in range(8):
        plog.append([rec(i * 4 + j, b"key-%d-%d" % (i, j), b"x" * 40) for j in range(4)])
        plog.roll()
    size = plog.segments[0].size_bytes
    assert 3 * size <= 900 < 4 * size, "three pre-clean segments fit one group (Kafka groups by size before cleaning)"
    plog.append([rec(32 + i, b"key-%d-0" % i, None) for i in range(8)])  # one tombstone per segment
    plog.roll()
    Cleaner(c).clean(plog, LogCleanerManager(c).select(plog, PID, 0), 0)
    sealed = plog.segments[:-1]
    assert [s.base_offset for s in sealed] == [0, 12, 24]
    assert [s.record_count for s in sealed] == [9, 9, 6 + 8]
    assert all(s.size_bytes <= 900 for s in sealed)


def test_log_end_offset_survives_cleaning_away_the_last_records(tmp_path) -> None:
    c = cfg(min_cleanable_dirty_ratio=0, delete_retention_ms=0)
    plog = new_log(tmp_path, c)
    plog.append([rec(0, b"a", b"1"), rec(5, b"a", None)])
    plog.roll()
    mgr = LogCleanerManager(c)
    mgr.clean_partition(PID, plog, 1)
    mgr.clean_partition(PID, plog, 2)
    assert contents(plog) == [] and plog.log_end_offset == 6
    assert new_log(tmp_path, c).log_end_offset == 6


def test_keyless_fail_policy_names_partition_and_offset_and_keeps_the_record(tmp_path) -> None:
    c = cfg(min_cleanable_dirty_ratio=0, compaction_keyless_policy="fail")
    plog = new_log(tmp_path, c)
    plog.append([rec(0, b"a", b"1"), rec(1, None, b"no key"), rec(2, b"a", b"2")])
    plog.roll()
    with pytest.raises(KeylessRecordError, match=r"partition t-0: record at offset 1 has no key"):
        Cleaner(c).clean(plog, LogCleanerManager(c).select(plog, PID, 0), 0)
    assert len(contents(plog)) == 3


@pytest.mark.parametrize("policy", ["drop", "dead-letter"])
def test_keyless_records_are_counted_by_policy(tmp_path, policy: str) -> None:
    c = cfg(min_cleanable_dirty_ratio=0, compaction_keyless_policy=policy)
    plog = new_log(tmp_path, c)
    plog.append([rec(0, None, b"x"), rec(1, b"a", b"1"), rec(2, None, b"y")])
    plog.roll()
    outcome = LogCleanerManager(c).clean_partition(PID, plog, 0)
    assert outcome.result.keyless == 2 and outcome.state.keyless_records == 2
    assert [r["offset"] for r in outcome.result.dead_letters] == ([0, 2] if policy == "dead-letter" else [])
    assert contents(plog) == [(1, b"a", b"1")]


def test_a_dead_letter_writer_fenced_ends_the_pass_and_is_no_backoff_of_the_partition(tmp_path) -> None:
    """Fenced is the task's producer done for good, not the partition failing: the caller ends the task (FENCED),
    the log and its cleaner state stay as they were, and the next stage cleans it at once."""
    c = cfg(min_cleanable_dirty_ratio=0, compaction_keyless_policy="dead-letter")
    plog = new_log(tmp_path, c)
    plog.append([rec(0, None, b"x"), rec(1, b"a", b"1"), rec(2, b"a", b"2")])
    plog.roll()

    def fenced(records) -> None:
        raise DeadLetterFenced("kcompact-job-0: fenced by a newer instance")
    with pytest.raises(DeadLetterFenced):
        LogCleanerManager(c).clean_partition(PID, plog, 0, dead_letter=fenced)
    state = PartitionCleanerState.load(plog)
    assert state.uncleanable_since_ms is None and state.retry_at_ms is None and not state.in_backoff(0)
    assert len(contents(plog)) == 3, "nothing swapped out"


def test_failed_partition_is_uncleanable_others_go_on_and_it_is_retried_after_backoff(tmp_path) -> None:
    c = cfg(min_cleanable_dirty_ratio=0, log_cleaner_backoff_ms=1000)
    good, bad = new_log(tmp_path / "good", c), new_log(tmp_path / "bad", c)
    for plog in (good, bad):
        plog.append([rec(i, b"k%d" % (i % 2), b"v" * 20) for i in range(10)])
        plog.roll()
    seg = segment_object(bad)
    data = bytearray(seg.read_bytes())
    data[-40:-20] = b"\xff" * 20  # damage record bytes inside a whole block
    seg.write_bytes(bytes(data))
    mgr = LogCleanerManager(c)
    logs = {PartitionId("t", 0): good, PartitionId("t", 1): bad}
    outcomes = {pid.partition: mgr.clean_partition(pid, plog, now_ms=0) for pid, plog in logs.items()}
    assert outcomes[0].result is not None and outcomes[0].error is None
    assert outcomes[1].error and outcomes[1].state.uncleanable and outcomes[1].state.retry_at_ms == 1000
    gauges = metrics(outcomes.values(), 0)
    assert gauges.uncleanable_partitions_count == 1 and gauges.uncleanable_bytes > 0
    skipped = mgr.clean_partition(PartitionId("t", 1), bad, now_ms=999)
    assert skipped.skipped_backoff and skipped.result is None
    retried = mgr.clean_partition(PartitionId("t", 1), bad, now_ms=1000)
    assert not retried.skipped_backoff and retried.error and retried.state.retry_at_ms == 2000
    assert retried.state.uncleanable_since_ms == 0


def test_throttle_holds_io_to_the_configured_rate() -> None:
    clock = {"t": 0.0}
    slept: list[float] = []

    def sleep(s: float) -> None:
        slept.append(s)
        clock["t"] += s

    throttler = Throttler(1000.0, clock=lambda: clock["t"], sleep=sleep)
    for _ in range(100):
        throttler.maybe_throttle(100)  # 10 kB at 1 kB/s, with no time passing otherwise
    assert sum(slept) == pytest.approx(10.0, rel=0.05)


def test_timestamp_strategy_keeps_highest_timestamp_even_when_it_arrived_first(tmp_path) -> None:
    c = cfg(min_cleanable_dirty_ratio=0, compaction_strategy="timestamp")
    plog = new_log(tmp_path, c)
    plog.append([rec(0, b"a", b"newest", ts=300), rec(1, b"a", b"older", ts=100), rec(2, b"a", b"tie", ts=300)])
    plog.roll()
    Cleaner(c).clean(plog, LogCleanerManager(c).select(plog, PID, 0), 0)
    assert contents(plog) == [(2, b"a", b"tie")], "equal versions: higher offset wins"


def test_late_lower_version_never_displaces_a_cleaned_higher_one(tmp_path) -> None:
    c = CompactionConfig(min_cleanable_dirty_ratio=0, compaction_strategy="header",
                         compaction_strategy_header="v")
    plog = new_log(tmp_path, c)

    def v(n: int) -> list:
        return [("v", n.to_bytes(8, "big", signed=True))]

    plog.append([rec(0, b"a", b"v5", headers=v(5))])
    plog.roll()
    mgr = LogCleanerManager(c)
    first = mgr.clean_partition(PID, plog, 0)
    assert [r["value"] for r in survivors(plog, first.result)] == [b"v5"]
    plog.append([rec(1, b"a", b"v3-late", headers=v(3)), rec(2, b"a", b"no-version")])
    plog.roll()
    second = mgr.clean_partition(PID, plog, 1)
    assert survivors(plog, second.result) == [], "nothing new reaches the sink"
    assert contents(plog) == [(0, b"a", b"v5")]
    plog.append([rec(3, b"a", b"v9", headers=v(9))])
    plog.roll()
    third = mgr.clean_partition(PID, plog, 2)
    assert [r["value"] for r in survivors(plog, third.result)] == [b"v9"]
    assert contents(plog) == [(3, b"a", b"v9")]


def test_header_strategy_counts_unusable_version_headers(tmp_path) -> None:
    c = CompactionConfig(min_cleanable_dirty_ratio=0, compaction_strategy="header", compaction_strategy_header="v")
    plog = new_log(tmp_path, c)
    plog.append([rec(0, b"a", b"8-byte", headers=[("v", (1).to_bytes(8, "big"))]),
                 rec(1, b"a", b"short", headers=[("v", b"\x01")]),
                 rec(2, b"a", b"repeated", headers=[("v", (9).to_bytes(8, "big")), ("v", (0).to_bytes(8, "big"))]),
                 rec(3, b"b", b"versioned", headers=[("v", (-5).to_bytes(8, "big", signed=True))]),
                 rec(4, b"b", b"missing")])
    plog.roll()
    outcome = LogCleanerManager(c).clean_partition(PID, plog, 0)
    assert contents(plog) == [(0, b"a", b"8-byte"), (3, b"b", b"versioned")], \
        "last occurrence of a repeated header counts (0 < 1); a record with a version beats one without"
    assert outcome.state.invalid_version_headers == 1, "a missing header is no version, not an invalid one"


def test_checkpoint_is_committed_with_the_log(tmp_path) -> None:
    c = cfg(min_cleanable_dirty_ratio=0)
    plog = new_log(tmp_path, c)
    plog.append([rec(0, b"a", b"1"), rec(1, b"a", b"2")])
    plog.roll()
    Cleaner(c).clean(plog, LogCleanerManager(c).select(plog, PID, 0), 0)
    assert plog.cleaner_checkpoint == 2 and new_log(tmp_path, c).cleaner_checkpoint == 2


def test_metrics_keep_last_pass_gauges_and_totals_through_idle_rounds(tmp_path) -> None:
    c = cfg(min_cleanable_dirty_ratio=0)
    plog = new_log(tmp_path, c)
    plog.append([rec(0, None, b"x"), rec(1, b"a", b"1"), rec(2, b"a", b"2")])
    plog.roll()
    mgr = LogCleanerManager(c)
    busy = metrics([mgr.clean_partition(PID, plog, now_ms=1000)], 1000)
    assert busy.keyless_records == 1 and busy.max_clean_time_secs > 0 and busy.cleaner_recopy_percent > 0
    idle = metrics([mgr.clean_partition(PID, plog, now_ms=4000)], 4000, 1000, busy)  # nothing eligible: no pass
    assert idle.keyless_records == 1, "a counter is a total, not this round's count"
    assert (idle.max_clean_time_secs, idle.cleaner_recopy_percent, idle.max_buffer_utilization_percent) == \
        (busy.max_clean_time_secs, busy.cleaner_recopy_percent, busy.max_buffer_utilization_percent)
    assert idle.time_since_last_run_ms == 3000


def test_damaged_log_is_uncleanable_with_the_damage_named_even_below_the_dirty_ratio(tmp_path) -> None:
    c = cfg(min_cleanable_dirty_ratio=0.99)
    plog = new_log(tmp_path, c)
    plog.append([rec(i, b"k%d" % i, b"v" * 20) for i in range(10)])
    plog.roll()
    seg = segment_object(plog)
    seg.write_bytes(seg.read_bytes()[:-25])
    reopened = new_log(tmp_path, c)
    outcome = LogCleanerManager(c).clean_partition(PID, reopened, 0)
    assert outcome.result is None and outcome.state.uncleanable
    assert "CorruptSegmentError" in outcome.error and segment_name(0) in outcome.error


def test_a_changed_byte_in_a_dirty_value_fails_the_pass_before_anything_is_swapped(tmp_path) -> None:
    c = cfg(min_cleanable_dirty_ratio=0)
    plog = new_log(tmp_path, c)
    plog.append([rec(i, b"k%d" % (i % 3), b"v" * 20) for i in range(10)])
    plog.roll()
    seg = segment_object(plog)
    data = bytearray(seg.read_bytes())
    data[data.index(b"v" * 20) + 3] ^= 0x01  # still decodes: only the checksum can tell
    seg.write_bytes(bytes(data))
    reopened = new_log(tmp_path, c)
    outcome = LogCleanerManager(c).clean_partition(PID, reopened, 0)
    assert outcome.result is None and "checksum mismatch" in outcome.error
    assert seg.read_bytes() == bytes(data) and reopened.cleaner_checkpoint is None


def test_a_full_disk_during_a_pass_stops_it_without_marking_the_partition(tmp_path, monkeypatch) -> None:
    """Disk full is the operator's to fix, not the log's: once there is room, the partition is cleaned at
    once, not held back by log.cleaner.backoff.ms (seen in the full-disk e2e test)."""
    c = cfg(min_cleanable_dirty_ratio=0)
    plog = new_log(tmp_path, c)
    plog.append([rec(0, b"a", b"1"), rec(1, b"a", b"2")])
    plog.roll()

    def full(*_a, **_k):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(plog, "replace", full)
    with pytest.raises(OSError):
        LogCleanerManager(c).clean_partition(PID, plog, now_ms=10_000)
    assert not PartitionCleanerState.load(plog).uncleanable
    monkeypatch.undo()
    assert LogCleanerManager(c).clean_partition(PID, plog, now_ms=10_001).result is not None
    assert contents(plog) == [(1, b"a", b"2")]


def test_a_pass_that_rewrites_its_last_group_commits_the_checkpoint_and_the_audit_with_it(tmp_path) -> None:
    c = cfg(min_cleanable_dirty_ratio=0)
    plog = new_log(tmp_path, c)
    plog.append([rec(0, b"a", None), rec(1, b"a", b"1"), rec(2, b"b", None)])
    plog.roll()
    before = plog.version
    Cleaner(c).clean(plog, LogCleanerManager(c).select(plog, PID, 0), 0)
    again = new_log(tmp_path, c)
    assert again.version == before + 1, "the rewrite and the checkpoint are one commit"
    assert again.cleaner_checkpoint == 3 and contents(again) == [(1, b"a", b"1"), (2, b"b", None)]
    assert [(e["e"], e["offset"]) for e in again.journal()] == [("superseded", 0), ("erased", 2)]


def test_a_pass_that_rewrites_only_an_earlier_group_commits_the_checkpoint_after_it(tmp_path) -> None:
    c = cfg(min_cleanable_dirty_ratio=0, segment_bytes=180)
    plog = new_log(tmp_path, c)
    plog.append([rec(0, b"a", b"x" * 40), rec(1, b"a", b"y" * 40)])
    plog.roll()
    plog.append([rec(2, b"b", b"z" * 40)])
    plog.roll()
    assert plog.segments[0].size_bytes + plog.segments[1].size_bytes > 180, "one group a segment"
    before = plog.version
    Cleaner(c).clean(plog, LogCleanerManager(c).select(plog, PID, 0), 0)
    again = new_log(tmp_path, c)
    assert again.version == before + 2 and again.cleaner_checkpoint == 3
    assert contents(again) == [(1, b"a", b"y" * 40), (2, b"b", b"z" * 40)]


def _segments_read(plog: PartitionLog, monkeypatch) -> list[int]:
    """The base offsets of the segments whose records (not only keys) the log is asked for, in order."""
    reads: list[int] = []
    whole = plog.segment_batches

    def counting(seg, check: bool = True):
        reads.append(seg.base_offset)
        return whole(seg, check)

    monkeypatch.setattr(plog, "segment_batches", counting)
    return reads


def test_a_dirty_range_of_new_keys_is_only_mapped(tmp_path, monkeypatch) -> None:
    """Every record of such a range is its key's winner, and the clean segment's key filter (built by the first
    pass, kept in the manifest) holds none of its keys: nothing can change, and the recopy reads nothing."""
    c = cfg(min_cleanable_dirty_ratio=0)
    plog = new_log(tmp_path, c)
    plog.append([rec(0, b"a", b"1"), rec(1, b"b", b"2")])
    plog.roll()
    Cleaner(c).clean(plog, LogCleanerManager(c).select(plog, PID, 0), 0)
    plog = new_log(tmp_path, c)
    assert plog.segments[0].key_filter is not None
    plog.append([rec(2, b"c", b"3"), rec(3, b"d", b"4")])
    plog.roll()
    reads = _segments_read(plog, monkeypatch)
    result = Cleaner(c).clean(plog, LogCleanerManager(c).select(plog, PID, 0), 0)
    assert reads == []
    assert result.end_offset == 4 and plog.cleaner_checkpoint == 4
    assert contents(plog) == [(0, b"a", b"1"), (1, b"b", b"2"), (2, b"c", b"3"), (3, b"d", b"4")]


def test_a_clean_segment_holding_a_key_of_the_dirty_range_is_read_and_rewritten(tmp_path, monkeypatch) -> None:
    c = cfg(min_cleanable_dirty_ratio=0, segment_bytes=40)  # a group a segment
    plog = new_log(tmp_path, c)
    for i, key in enumerate([b"a", b"b", b"c"]):
        plog.append([rec(i, key, b"%d" % i)])
        plog.roll()
    Cleaner(c).clean(plog, LogCleanerManager(c).select(plog, PID, 0), 0)
    assert [s.base_offset for s in plog.segments[:-1]] == [0, 1, 2] and all(s.key_filter for s in plog.segments[:-1])
    plog.append([rec(3, b"b", b"new"), rec(4, b"d", b"4")])
    plog.roll()
    reads = _segments_read(plog, monkeypatch)
    Cleaner(c).clean(plog, LogCleanerManager(c).select(plog, PID, 0), 0)
    assert reads == [1], "only the segment that holds b; the dirty range's is only mapped"
    assert contents(plog) == [(0, b"a", b"0"), (2, b"c", b"2"), (3, b"b", b"new"), (4, b"d", b"4")]


def test_a_clean_segment_whose_tombstone_is_due_is_read_though_its_keys_are_not_touched(tmp_path, monkeypatch) -> None:
    c = cfg(min_cleanable_dirty_ratio=0, delete_retention_ms=100)
    plog = new_log(tmp_path, c)
    plog.append([rec(0, b"a", b"1"), rec(1, b"b", None)])
    plog.roll()
    Cleaner(c).clean(plog, LogCleanerManager(c).select(plog, PID, 0), 0)  # b's tombstone gets its horizon: 100
    assert plog.segments[0].key_filter is not None and plog.segments[0].min_delete_horizon_ms == 100
    plog.append([rec(2, b"c", b"3")])
    plog.roll()
    reads = _segments_read(plog, monkeypatch)
    Cleaner(c).clean(plog, LogCleanerManager(c).select(plog, PID, 50), 50)
    assert reads == [], "its horizon has not passed"
    Cleaner(c).clean(plog, LogCleanerManager(c).select(plog, PID, 200), 200)
    assert 0 in reads and contents(plog) == [(0, b"a", b"1"), (2, b"c", b"3")]


@pytest.mark.parametrize("dirty", [
    [rec(2, b"c", b"3"), rec(3, b"c", b"4")],  # a key twice
    [rec(2, b"c", b"3"), rec(3, b"d", None)],  # a tombstone, which gets its horizon
    [rec(2, b"c", b"3"), rec(3, None, b"4")],  # a keyless record, dropped
], ids=["repeated-key", "tombstone", "keyless"])
def test_a_dirty_range_that_changes_is_read_and_rewritten(tmp_path, monkeypatch, dirty) -> None:
    c = cfg(min_cleanable_dirty_ratio=0, compaction_keyless_policy="drop")
    plog = new_log(tmp_path, c)
    plog.append(dirty)
    plog.roll()
    reads = _segments_read(plog, monkeypatch)
    before = plog.version
    Cleaner(c).clean(plog, LogCleanerManager(c).select(plog, PID, 0), 10)
    assert 0 in reads and plog.version == before + 1, "read and rewritten, with the checkpoint"
    kept = plog.segments[0]
    assert kept.record_count == (2 if dirty[1]["key"] == b"d" else 1)
    assert kept.min_delete_horizon_ms == (10 + c.delete_retention_ms if dirty[1]["key"] == b"d" else None)


def test_a_clean_record_that_outranks_a_new_dirty_key_still_drops_it(tmp_path, monkeypatch) -> None:
    """A dirty range of new keys is left unread only while no clean record beat one of its winners."""
    c = CompactionConfig(min_cleanable_dirty_ratio=0, compaction_strategy="header", compaction_strategy_header="v")
    plog = new_log(tmp_path, c)
    v = lambda n: [("v", n.to_bytes(8, "big", signed=True))]  # noqa: E731
    plog.append([rec(0, b"a", b"v5", headers=v(5))])
    plog.roll()
    Cleaner(c).clean(plog, LogCleanerManager(c).select(plog, PID, 0), 0)
    plog.append([rec(1, b"a", b"v3-late", headers=v(3)), rec(2, b"b", b"v1", headers=v(1))])
    plog.roll()
    Cleaner(c).clean(plog, LogCleanerManager(c).select(plog, PID, 0), 0)
    assert contents(plog) == [(0, b"a", b"v5"), (2, b"b", b"v1")]


def test_a_pass_says_what_it_did_at_debug_not_at_the_default_level(tmp_path, caplog) -> None:
    """A whole cluster's job passes over thousands of logs a stage: a line a pass at INFO would be thousands of
    lines every few seconds, each written through Spark's worker (the stage's progress line counts them)."""
    c = cfg(min_cleanable_dirty_ratio=0)
    plog = new_log(tmp_path, c)
    plog.append([rec(0, b"a", b"1"), rec(1, b"a", b"2")])
    plog.roll()
    with caplog.at_level("INFO", logger="streaming.cleaner"):
        outcome = LogCleanerManager(c).clean_partition(PID, plog, now_ms=10_000)
    assert outcome.result is not None and caplog.records == []
    plog.append([rec(2, b"a", b"3")])
    plog.roll()
    with caplog.at_level("DEBUG", logger="streaming.cleaner"):
        LogCleanerManager(c).clean_partition(PID, plog, now_ms=20_000)
    assert any(r.getMessage().startswith(f"cleaned {PID} ") for r in caplog.records)
