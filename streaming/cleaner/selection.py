"""Which part of a partition log is cleanable now, and whether it should be cleaned (LogCleanerManager).

Everything is computed from segment metadata and the checkpoint, never from records, so selection over
many partitions is cheap. Time is passed in, so every rule is testable without sleeping.
"""

from __future__ import annotations

from dataclasses import dataclass

from streaming.partition_id import PartitionId
from streaming.cleaner.config import CompactionConfig
from streaming.configuration.settings import LONG_MAX
from streaming.log.segment import SegmentMeta


@dataclass(frozen=True)
class LogToClean:
    partition: PartitionId
    log_start_offset: int
    first_dirty_offset: int
    first_uncleanable_offset: int
    clean_bytes: int
    cleanable_bytes: int
    cleanable_records: int  # of the segments cleanable_bytes counts: at most what a pass maps
    compaction_delay_ms: int
    tombstones_due: bool

    @property
    def total_bytes(self) -> int:
        return self.clean_bytes + self.cleanable_bytes

    @property
    def cleanable_ratio(self) -> float:
        return self.cleanable_bytes / self.total_bytes if self.total_bytes else 0.0

    @property
    def needs_compaction_now(self) -> bool:
        """KIP-354: the earliest dirty record is older than max.compaction.lag.ms."""
        return self.compaction_delay_ms > 0

    def eligible(self, min_ratio: float) -> bool:
        return ((self.cleanable_bytes > 0 and (self.needs_compaction_now or self.cleanable_ratio > min_ratio))
                or self.tombstones_due)


def log_to_clean(segments: list[SegmentMeta], partition: PartitionId, checkpoint: int | None,
                 config: CompactionConfig, now_ms: int) -> LogToClean:
    """Selection from a log's segment metadata (last = active segment), read from disk or from an open log."""
    active = segments[-1]
    start, end = segments[0].base_offset, active.next_offset
    first_dirty = checkpoint if checkpoint is not None else start
    if not start <= first_dirty <= end:  # a checkpoint outside the log (Kafka resets it to the log start too)
        first_dirty = start

    uncleanable = active.base_offset
    sealed_dirty = [s for s in segments[:-1] if s.next_offset > first_dirty]
    if config.min_compaction_lag_ms > 0:
        young_after = now_ms - config.min_compaction_lag_ms
        for s in sealed_dirty:
            if s.largest_timestamp is not None and s.largest_timestamp > young_after:
                uncleanable = min(uncleanable, s.base_offset)
                break
    uncleanable = max(uncleanable, first_dirty)

    clean_bytes = sum(s.size_bytes for s in segments if s.next_offset <= first_dirty)
    # A segment straddling first_dirty counts whole, but only while some of its dirty part is cleanable.
    cleanable = [s for s in sealed_dirty if s.base_offset < uncleanable] if uncleanable > first_dirty else []
    cleanable_bytes = sum(s.size_bytes for s in cleanable)
    firsts = [s.first_timestamp for s in sealed_dirty if s.first_timestamp is not None]
    earliest = min(firsts) if firsts else None
    delay = max(0, now_ms - config.max_compaction_lag_ms - earliest) if earliest is not None else 0
    tombstones_due = any(s.min_delete_horizon_ms is not None and s.min_delete_horizon_ms <= now_ms
                         for s in segments[:-1])
    return LogToClean(partition, start, first_dirty, uncleanable, clean_bytes, cleanable_bytes,
                      sum(s.record_count for s in cleanable), delay, tombstones_due)


@dataclass(frozen=True)
class NextClean:
    """When the oldest dirty record that no pass can take now becomes cleanable: from ``earliest_ms`` (its
    segment rolled and min.compaction.lag.ms passed, if the dirty ratio allows), and at ``latest_ms`` by
    KIP-354's bound (None when max.compaction.lag.ms is unbounded)."""

    offset: int
    earliest_ms: int
    latest_ms: int | None


def next_clean(segments: list[SegmentMeta], target: LogToClean, config: CompactionConfig) -> NextClean | None:
    """None when a pass can run now, or when no dirty record waits."""
    if target.eligible(config.min_cleanable_dirty_ratio):
        return None
    waiting = next((s for s in segments if s.next_offset > target.first_dirty_offset and s.record_count
                    and s.first_timestamp is not None), None)
    if waiting is None:
        return None
    earliest = waiting.first_timestamp + config.log_config.roll_ms if waiting is segments[-1] else 0
    earliest = max(earliest, waiting.largest_timestamp + config.min_compaction_lag_ms)
    bounded = config.max_compaction_lag_ms < LONG_MAX
    latest = max(earliest, waiting.first_timestamp + config.max_compaction_lag_ms) if bounded else None
    return NextClean(max(target.first_dirty_offset, waiting.base_offset), earliest, latest)


def quiet_until(segments: list[SegmentMeta], target: LogToClean, config: CompactionConfig, now_ms: int) -> int | None:
    """Until when the log needs no pass and no forced roll if no record arrives: the first of the KIP-354 roll
    of its active segment, its oldest dirty record becoming cleanable, and a tombstone's delete horizon; None
    when it needs one now, LONG_MAX when nothing but a new record can make it need one. A compaction stage
    gives a log that owes the sink nothing no task until then, so idle partitions cost nothing per trigger."""
    if target.eligible(config.min_cleanable_dirty_ratio):
        return None
    times = [s.min_delete_horizon_ms for s in segments if s.min_delete_horizon_ms is not None]
    active = segments[-1]
    if active.record_count and active.first_timestamp is not None and config.max_compaction_lag_ms < LONG_MAX:
        times.append(active.first_timestamp + config.max_compaction_lag_ms + 1)
    waiting = next_clean(segments, target, config)
    if waiting is not None:
        due = waiting.earliest_ms if waiting.earliest_ms > now_ms else waiting.latest_ms
        if due is not None:
            times.append(due)
    when = min(times, default=LONG_MAX)
    return None if when <= now_ms else when
