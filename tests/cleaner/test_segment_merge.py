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


def _trickle(path, cycles: int, per_cycle: int) -> PartitionLog:
    """``cycles`` stages of new keys, each rolled and cleaned, as a trickling log's stages run."""
    mgr = LogCleanerManager(CONFIG)
    offset = 0
    for cycle in range(cycles):
        plog = PartitionLog(str(path), CONFIG.log_config, jitter_seed="t-0")
        plog.append([make_record(offset + i, b"k%d" % (offset + i), b"v" * 50, cycle) for i in range(per_cycle)],
                    now_ms=cycle)
        offset += per_cycle
        plog.roll()
        assert mgr.clean_partition(PID, plog, cycle).result is not None
    return PartitionLog(str(path), CONFIG.log_config, jitter_seed="t-0")


def test_a_log_whose_passes_change_nothing_keeps_a_logarithmic_number_of_segments(tmp_path) -> None:
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
