"""A log whose passes change nothing (every record a new key, rolled each trigger) keeps a few clean segments, not
one more a pass: their descriptions are in every manifest, read and written by every open and commit of the log."""

from __future__ import annotations

import math

from streaming.cleaner import CompactionConfig, LogCleanerManager
from streaming.cleaner.segment_merge import MERGE_FAN_IN, merge_tail
from streaming.log import PartitionLog, make_record
from streaming.log.key_filter import MAX_KEYS
from streaming.log.segment import SegmentMeta
from streaming.partition_id import PartitionId

PID = PartitionId("t", 0)
CONFIG = CompactionConfig.from_mapping({"min.cleanable.dirty.ratio": "0", "max.compaction.lag.ms": "1"})


def _trickle(path, cycles: int, per_cycle: int, record=None, emitted=None) -> PartitionLog:
    """``cycles`` stages of new keys, each rolled and cleaned, as a trickling log's stages run; ``record(offset)``
    makes each record, ``emitted(offset)`` says how far the sink has them (None: no sink)."""
    mgr = LogCleanerManager(CONFIG)
    make = record or (lambda o: make_record(o, b"k%d" % o, b"v" * 50, o))
    offset = 0
    for cycle in range(cycles):
        plog = PartitionLog(str(path), CONFIG.log_config, jitter_seed="t-0")
        plog.append([make(offset + i) for i in range(per_cycle)], now_ms=cycle)
        offset += per_cycle
        plog.roll()
        version = plog.version
        assert mgr.clean_partition(PID, plog, cycle, emitted_up_to=emitted and emitted(offset)).result is not None
        assert plog.version == version + 2, "a pass, merging or not, commits once (and its cleaner state once)"
    return PartitionLog(str(path), CONFIG.log_config, jitter_seed="t-0")


def test_a_log_whose_passes_change_nothing_keeps_a_few_segments_not_one_a_pass(tmp_path) -> None:
    plog = _trickle(tmp_path, cycles=200, per_cycle=5)
    sealed = plog.segments[:-1]
    assert len(sealed) <= MERGE_FAN_IN * math.ceil(math.log2(200)), [s.record_count for s in sealed]
    assert [r["offset"] for r in plog.read()] == list(range(1000)), "merging loses and reorders nothing"
    assert plog.cleaner_checkpoint == plog.log_end_offset
    assert all(s.key_filter is not None for s in sealed), "a merged segment keeps the filter that leaves it unread"


def test_merged_segments_stop_growing_where_their_key_filter_would_end(tmp_path) -> None:
    plog = _trickle(tmp_path, cycles=60, per_cycle=100)
    sealed = plog.segments[:-1]
    assert all(s.record_count <= MAX_KEYS and s.key_filter is not None for s in sealed)
    assert len(sealed) < 60 / 2, "segments of 100 records were merged"
    assert sum(s.record_count for s in sealed) == 6000


def test_a_merge_keeps_every_record_as_it_was_tombstones_and_their_horizons_too(tmp_path) -> None:
    def record(offset: int) -> dict:
        return make_record(offset, b"k%d" % offset, None if offset % 3 == 0 else b"v%d" % offset, offset - 5,
                           [("h", b"%d" % offset)])

    plog = _trickle(tmp_path, cycles=40, per_cycle=5, record=record)
    assert len(plog.segments) < 40 / 2
    got = list(plog.read())
    assert [(r["offset"], r["key"], r["value"], r["timestamp"], r["headers"]) for r in got] == [
        (o, b"k%d" % o, None if o % 3 == 0 else b"v%d" % o, o - 5, [{"key": "h", "value": b"%d" % o}])
        for o in range(200)]
    assert all(r["delete_horizon_ms"] is not None for r in got if r["value"] is None), "horizons given are kept"


def test_segments_the_sink_does_not_have_yet_are_not_merged(tmp_path) -> None:
    plog = _trickle(tmp_path, cycles=40, per_cycle=5, emitted=lambda end: min(end, 50) - 1)
    assert [s.record_count for s in plog.segments if s.base_offset >= 50][:-1] == [5] * 30, \
        "what emission reads next stays in the objects the passes wrote"
    assert len([s for s in plog.segments if s.next_offset <= 50]) < 10


def _segs(*sizes: int, base: int = 0, filtered: bool = True) -> list[SegmentMeta]:
    out = []
    for size in sizes:
        out.append(SegmentMeta(base, base + size, base + size - 1, size, size * 100, clean=True,
                               key_filter="AAAAAA==" if filtered else None))
        base += size
    return out


def test_the_tail_merges_once_fan_in_segments_of_its_size_trail_it() -> None:
    assert merge_tail(_segs(*[1] * (MERGE_FAN_IN - 1)), 10**9) == []
    assert len(merge_tail(_segs(*[1] * MERGE_FAN_IN), 10**9)) == MERGE_FAN_IN
    big = MERGE_FAN_IN * 2
    assert merge_tail(_segs(big, *[1] * (MERGE_FAN_IN - 1)), 10**9) == [], "a larger segment is not copied for less"


def test_the_tail_leaves_what_this_pass_cleaned_and_segments_without_a_filter() -> None:
    segs = _segs(*[1] * MERGE_FAN_IN)
    assert merge_tail(segs, segs[-1].base_offset) == [], "the newest was dirty until this pass: emission reads it"
    unfiltered = [*_segs(1, filtered=False), *_segs(*[1] * (MERGE_FAN_IN - 1), base=1)]
    assert merge_tail(unfiltered, 10**9) == []
