"""One cleaning pass over one partition log (Kafka's Cleaner.doClean), with KIP-280 strategies.

1. Map: scan the dirty range [first dirty, first uncleanable) into the offset map, key -> winner. When the
   map reaches its load factor the pass ends there: the next pass continues, so every pass progresses and
   memory stays flat.
2. Recopy: every sealed segment below the pass's end offset, in groups of at most segment.bytes. A record
   survives iff it is its key's winner. Clean-section records are ranked against the dirty winners as the
   recopy meets them (they come first in offset order), so a late lower version never displaces a higher
   one already cleaned. A group in which nothing changes is not rewritten (its small clean segments are merged:
   streaming.cleaner.segment_merge), and what the map phase shows cannot change is not even read (DirtyRange):
   a dirty range whose every record is its key's winner (each key once, none a tombstone or keyless, none
   outranked by a clean record), and a clean segment whose key filter (streaming.log.key_filter) holds none of
   the mapped keys and whose tombstones are not due. Where a whole cluster trickles, a pass reads only its new
   records, once, and a few small clean segments when it merges them; Kafka's reads them twice and the rest of the
   log once.
3. Tombstones (KIP-534): a surviving tombstone without a delete horizon gets now + delete.retention.ms;
   one whose horizon has passed is removed, once the sink has committed it (a tombstone removed before
   would never delete its key there). So a tombstone needs two passes and is never kept forever.

What the passes keep of the cleaned range is what the pipeline emits: it is read back from the log after
the swap, so emitting it costs no memory however large the range.
"""

from __future__ import annotations

import functools
import itertools
import logging
import time
from dataclasses import dataclass, field
from typing import Callable, Iterator, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from streaming.cleaner.config import CompactionConfig, KeylessPolicy, Strategy
from streaming.cleaner.dirty_range import DirtyRange
from streaming.cleaner.hash_memo import HashMemo
from streaming.cleaner.offset_map import OffsetMap, rank_greater
from streaming.cleaner.segment_merge import merge, merge_tail, size_groups
from streaming.cleaner.selection import LogToClean
from streaming.cleaner.strategy import VersionReader
from streaming.cleaner.throttle import Throttler
from streaming.partition_id import PartitionId
from streaming.erasure import events as audit
from streaming.erasure.events import AuditKeys
from streaming.log import PartitionLog, records_from_batch
from streaming.log.journal import JournalEvent
from streaming.log.columns import offsets_of, record_sizes, validity
from streaming.log import key_filter
from streaming.log.key_filter import FilterBuilder
from streaming.log.key_hash import hash_keys
from streaming.log.record import LogRecord
from streaming.log.segment import SegmentMeta

log = logging.getLogger(__name__)

DeadLetterSink = Callable[[list[LogRecord]], None]


class DeadLetterFenced(RuntimeError):
    """The dead-letter sink's writer is fenced for good (another holds its transactional id): nothing more it
    writes can commit. Not a failure of the partition's pass, to back off from: it ends the task (the task's
    producer is that writer), and the next stage cleans and sends again."""


class KeylessRecordError(RuntimeError):
    """compaction.keyless.policy=fail met a record without a key."""

    def __init__(self, partition: PartitionId, offset: int) -> None:
        super().__init__(f"partition {partition}: record at offset {offset} has no key and cannot be compacted "
                         f"(compaction.keyless.policy=fail; set drop or dead-letter to go on)")
        self.partition = partition
        self.offset = offset


@dataclass
class CleanResult:
    partition: PartitionId
    start_offset: int          # the first dirty offset this pass started from
    end_offset: int            # the new checkpoint: everything below is clean
    now_ms: int
    records_read: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    records_removed: int = 0
    tombstones_removed: int = 0
    tombstones_superseded: int = 0  # dropped for a later record of their key (the erase audit reads them back)
    keyless: int = 0
    invalid_version_headers: int = 0
    dead_letters: list[LogRecord] = field(default_factory=list)
    buffer_utilization: float = 0.0
    map_full: bool = False
    elapsed_s: float = 0.0
    erased: list[audit.Erased] = field(default_factory=list, repr=False)  # the erase audit's, committed with the checkpoint


class Cleaner:
    """Holds the offset map (allocated once, like a Kafka cleaner thread's) and runs passes."""

    def __init__(self, config: CompactionConfig, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.config = config
        self.map = OffsetMap(config.dedupe_buffer_size, config.compaction_strategy is not Strategy.OFFSET,
                             config.io_buffer_load_factor, records=0)  # each pass grows it to what it maps
        self.memo = HashMemo(config.dedupe_buffer_size // 4)
        self.clock = clock
        self.sleep = sleep

    def clean(self, plog: PartitionLog, target: LogToClean, now_ms: int,
              dead_letter: DeadLetterSink | None = None, emitted_up_to: int | None = None) -> CleanResult:
        """One pass. With compaction.keyless.policy=dead-letter, ``dead_letter`` receives the keyless
        records before the segments that held them are swapped out, so a crash can repeat them but never
        lose them; without it they are collected in the result. ``emitted_up_to``: the source offset
        through which the sink has committed the log's records; a tombstone past it stays, whatever its
        horizon (None: no sink is fed from this log)."""
        started = self.clock()
        throttler = Throttler(self.config.io_max_bytes_per_second, self.clock, self.sleep)
        versions = VersionReader(self.config)
        result = CleanResult(target.partition, target.first_dirty_offset, target.first_dirty_offset, now_ms)
        self.map.clear(target.cleanable_records)
        self.memo.clear()
        checked: set[int] = set()
        dirty = DirtyRange(target.first_dirty_offset, now_ms)
        result.end_offset = self._build_map(plog, target, versions, result, throttler, checked, dirty)
        self.memo.seal()
        result.buffer_utilization = self.map.utilization
        try:
            swapped = self._recopy(plog, target, versions, result, throttler, dead_letter, checked, emitted_up_to,
                                   dirty)
        finally:
            self.memo.clear()
        if not swapped:  # a swap commits the checkpoint and the erase audit's events with it
            plog.set_cleaner_checkpoint(result.end_offset, journal=result.erased)
        result.invalid_version_headers = versions.invalid_headers
        result.elapsed_s = self.clock() - started
        log.debug("cleaned %s [%d, %d): read %d records, removed %d (%d tombstones), %d keyless, map %.0f%% full, "
                  "%.2fs", target.partition, result.start_offset, result.end_offset, result.records_read,
                  result.records_removed, result.tombstones_removed, result.keyless,
                  100 * result.buffer_utilization, result.elapsed_s)
        return result

    # ----- phase 1: the offset map -------------------------------------------------------------------------

    def _build_map(self, plog: PartitionLog, target: LogToClean, versions: VersionReader, result: CleanResult,
                   throttler: Throttler, checked: set[int], dirty: DirtyRange) -> int:
        """Map the dirty range; return the pass's end offset (first offset not mapped). Only keys are read
        (values are most of the bytes), each segment's bytes checked on the way; a segment read to its end
        goes into ``checked``, so the recopy need not check it again. ``dirty`` learns whether the range holds
        only new keys, and their fingerprints where a clean segment has a key filter to ask. A small segment read
        whole gets its own filter (streaming.log.key_filter), committed with the pass."""
        lo, hi = target.first_dirty_offset, target.first_uncleanable_offset
        segments = plog.segments[:-1]
        filtered = any(s.key_filter is not None for s in segments if s.next_offset <= lo)
        prints: list[np.ndarray] | None = [] if filtered else None
        filters: dict[int, str] = {}
        try:
            return self._map_segments(plog, segments, lo, hi, target, versions, result, throttler, checked, dirty,
                                      prints, filters)
        finally:
            if filters:
                plog.describe_keys(filters)
            if prints is not None:
                dirty.prints = key_filter.asked(np.concatenate(prints or [np.empty(0, "<u4")]))

    def _map_segments(self, plog: PartitionLog, segments: list[SegmentMeta], lo: int, hi: int, target: LogToClean,
                      versions: VersionReader, result: CleanResult, throttler: Throttler, checked: set[int],
                      dirty: DirtyRange, prints: list[np.ndarray] | None,
                      filters: dict[int, str]) -> int:
        omap = self.map
        mapped_records = 0
        for seg in segments:
            if seg.next_offset <= lo:
                continue
            if seg.base_offset >= hi:
                break
            keys = FilterBuilder() if (seg.key_filter is None and lo <= seg.base_offset and seg.next_offset <= hi
                                       and seg.record_count <= key_filter.MAX_KEYS) else None
            for batch in plog.segment_keys(seg):
                off = offsets_of(batch)
                if off[-1] < lo:
                    continue
                if off[0] < lo or off[-1] >= hi:
                    a, b = np.searchsorted(off, [lo, hi])
                    batch = batch.slice(int(a), int(b - a))
                    if not batch.num_rows:
                        continue
                has_key = validity(batch.column("key"))
                keyed = batch if has_key.all() else batch.filter(pa.array(has_key))
                if keyed is not batch and self.config.keyless_policy is KeylessPolicy.FAIL:
                    raise KeylessRecordError(target.partition, int(offsets_of(batch)[np.argmin(has_key)]))
                tombstones = keyed.column("tombstone").true_count
                if keyed is not batch or tombstones:
                    dirty.new_keys_only = False
                if keys is not None and tombstones:
                    keys.give_up()  # each needs a horizon: the pass rewrites the segment, and the rewrite has a filter
                h1, h2 = hash_keys(keyed.column("key"))
                off = offsets_of(keyed)
                ver = versions.versions(keyed) if omap.versioned else None
                mapped = omap.put(h1, h2, off, ver)
                if prints is not None or (keys is not None and keys.wants):
                    found = key_filter.fingerprints(keyed.column("key"))
                    if keys is not None:
                        keys.add(found)
                    if prints is not None:
                        prints.append(found[:mapped])
                mapped_records += mapped
                dirty.new_keys_only &= omap.size == mapped_records
                self.memo.keep(off[:mapped], h1[:mapped], h2[:mapped])
                throttler.maybe_throttle(int(batch.column("size").to_numpy().sum()))
                if mapped < len(off):  # the map is full: this record's key is the first that did not fit
                    result.map_full = True
                    return int(off[mapped])
            checked.add(seg.base_offset)
            if keys is not None and (built := keys.build()) is not None:
                filters[seg.base_offset] = built
        return hi

    # ----- phase 2: recopy ---------------------------------------------------------------------------------

    def _recopy(self, plog: PartitionLog, target: LogToClean, versions: VersionReader, result: CleanResult,
                throttler: Throttler, dead_letter: DeadLetterSink | None, checked: set[int],
                emitted_up_to: int | None, dirty: DirtyRange) -> bool:
        """Rewrites each group a decision changes, merges the small clean segments of one nothing changes
        (segment_merge); the last group's rewrite or merge commits the pass's checkpoint and the erase audit's events,
        and then says so (True): the pass needs no commit of its own."""
        groups = size_groups(plog.segments[:-1], result.end_offset, self.config.segment_bytes)
        mergeable_below = dirty.start if emitted_up_to is None else min(dirty.start, emitted_up_to + 1)
        for i, group in enumerate(groups):
            last = i == len(groups) - 1
            rewrote = self._rewrite(plog, group, last, versions, result, throttler, dead_letter, checked, emitted_up_to,
                                    dirty)
            tail = [] if rewrote else merge_tail(group, mergeable_below)
            if tail:
                new = merge(plog, tail, checked, journal=functools.partial(_joined, result.erased if last else []),
                            checkpoint=result.end_offset if last else None)
                result.records_read += new.record_count  # the tail's records, read and written as they were
                result.bytes_read += new.size_bytes
                result.bytes_written += new.size_bytes
                throttler.maybe_throttle(2 * new.size_bytes)
            if last and (rewrote or tail):
                return True
        return False

    def _rewrite(self, plog: PartitionLog, group: Sequence[SegmentMeta], last: bool, versions: VersionReader,
                 result: CleanResult, throttler: Throttler, dead_letter: DeadLetterSink | None, checked: set[int],
                 emitted_up_to: int | None, dirty: DirtyRange) -> bool:
        """The group rewritten if a decision changes it (True), with the pass's checkpoint if it is the last."""
        removals: list[audit.Removed | audit.Superseded] = []  # tombstones this group's rewrite removes: journaled with its swap
        decisions = self._decide(plog, group, dirty, versions, result, throttler, dead_letter, checked, removals,
                                 emitted_up_to)
        unchanged = 0
        for decision in decisions:
            if decision is None:  # the rest of the group stays as it is
                return False
            batch, keep, horizon = decision
            if keep.all() and not horizon.any():
                unchanged += 1
                continue
            rewritten = itertools.chain(
                itertools.islice((b for b in self._read_until_unchanged(plog, group, checked, dirty)
                                  if b is not None), unchanged),
                [self._apply(batch, keep, horizon, result)],
                (self._apply(*d, result) for d in decisions if d is not None))
            new = plog.replace(group, rewritten, clean=group[-1].next_offset <= result.end_offset,
                               journal=functools.partial(_joined, removals, result.erased if last else []),
                               checkpoint=result.end_offset if last else None)
            result.bytes_written += new.size_bytes
            throttler.maybe_throttle(new.size_bytes)
            return True
        return False

    @staticmethod
    def _read_until_unchanged(plog: PartitionLog, group: Sequence[SegmentMeta], checked: set[int],
                              dirty: DirtyRange) -> Iterator[pa.RecordBatch | None]:
        """The group's records, with a None before the segment from which the rest of the group stays as it is; a
        segment is read only once the batches before it (and the None) are taken. Re-reading gives the same
        batches, which is how unchanged ones are copied. Segments the map phase checked are not checked again."""
        rest = dirty.unchanged_from(group, checked)
        for i, seg in enumerate(group):
            # read again when reached: a clean record of the segments before may have outranked a dirty one
            if i == rest and dirty.unchanged(group[i:], checked):
                yield None
            yield from plog.segment_batches(seg, check=seg.base_offset not in checked)

    def _apply(self, batch: pa.RecordBatch, keep: np.ndarray, horizon: np.ndarray,
               result: CleanResult) -> pa.RecordBatch:
        if horizon.any():
            i = batch.schema.get_field_index("delete_horizon_ms")
            column = pc.if_else(pa.array(horizon), pa.scalar(result.now_ms + self.config.delete_retention_ms),
                                batch.column(i))
            batch = batch.set_column(i, batch.schema.field(i), column)
        return batch.filter(pa.array(keep))

    def _decide(self, plog: PartitionLog, group: Sequence[SegmentMeta], dirty: DirtyRange, versions: VersionReader,
                result: CleanResult, throttler: Throttler, dead_letter: DeadLetterSink | None,
                checked: set[int], removals: list[audit.Removed | audit.Superseded],
                emitted_up_to: int | None) -> Iterator[tuple[pa.RecordBatch, np.ndarray, np.ndarray] | None]:
        """Per batch of the group: which records survive, and which surviving tombstones get a horizon. The
        erase audit's events go to ``removals`` (tombstones removed) and result.erased (tombstones that won).
        None, once, where the rest of the group is known to stay as it is (DirtyRange): a caller that has changed
        nothing yet stops there, unread; one rewriting the group reads on, to copy the rest."""
        omap = self.map
        first_dirty = dirty.start
        auditing = self.config.erase_audit_keys is not AuditKeys.OFF
        end = result.end_offset
        now = result.now_ms
        for batch in self._read_until_unchanged(plog, group, checked, dirty):
            if batch is None:
                yield None
                continue
            n = batch.num_rows
            result.records_read += n
            nbytes = int(record_sizes(batch).sum())
            result.bytes_read += nbytes
            off = offsets_of(batch)
            has_key = validity(batch.column("key"))
            in_pass = off < end
            keep = np.ones(n, dtype=bool)

            keyless = in_pass & ~has_key & (off >= first_dirty)
            if keyless.any():
                keep[keyless] = False
                result.keyless += int(keyless.sum())
                if self.config.keyless_policy is KeylessPolicy.DEAD_LETTER:
                    letters = records_from_batch(batch.filter(pa.array(keyless)))
                    if dead_letter is not None:
                        dead_letter(letters)
                    else:
                        result.dead_letters.extend(letters)
                else:
                    log.warning("%s: dropped %d keyless records (compaction.keyless.policy=drop)",
                                result.partition, int(keyless.sum()))

            idx = np.flatnonzero(in_pass & has_key)
            winner = np.full(n, -1, dtype=np.int64)
            if idx.size:
                keys = batch.column("key")
                keys = keys if idx.size == n else keys.take(pa.array(idx))
                roff = off[idx]
                h1, h2 = self.memo.hashes(keys, roff)
                slot, moff, mver = omap.get(h1, h2)
                found = slot >= 0
                clean = found & (roff < first_dirty)
                if clean.any() and omap.versioned:
                    # A clean record that outranks the dirty winner stays the winner: record it in the map
                    # so the dirty records of its key, met later in this pass, are dropped.
                    cver = versions.versions(batch.take(pa.array(idx[clean])))
                    beats = rank_greater(cver, roff[clean], mver[clean], moff[clean])
                    if beats.any():
                        dirty.outranked = True
                        omap.set_at(slot[clean][beats], roff[clean][beats], cver[beats])
                        # dirty records of the same keys may sit in this very batch: re-read winners
                        moff = np.where(found, omap.off[np.where(found, slot, 0)], moff)
                keep[idx] = ~found | (moff == roff)
                winner[idx] = np.where(found, moff, -1)

            horizons = batch.column("delete_horizon_ms")
            has_horizon = validity(horizons)
            deletes = ~validity(batch.column("value")) & has_key
            tomb = keep & deletes
            horizon = tomb & ~has_horizon & in_pass
            horizon_ms = horizons.fill_null(0).to_numpy(zero_copy_only=False)
            expired = tomb & has_horizon & (now >= horizon_ms)
            if emitted_up_to is not None:
                expired &= off <= emitted_up_to  # held for the sink: its horizon passed while emission stalled
            if deletes.any():
                dropped = deletes & in_pass & ~keep
                result.tombstones_superseded += int(dropped.sum())
                if auditing:
                    removals.extend(audit.superseded(off[dropped], winner[dropped], now))
                    removals.extend(audit.removed(off[expired], now))
                    won = tomb & ~expired & in_pass & (off >= first_dirty)
                    result.erased.extend(audit.erased(
                        off[won], batch.column("timestamp").to_numpy()[won],
                        np.where(horizon, now + self.config.delete_retention_ms, horizon_ms)[won], now))
            keep &= ~expired
            result.tombstones_removed += int(expired.sum())
            result.records_removed += int(n - keep.sum())
            throttler.maybe_throttle(nbytes)
            yield batch, keep, horizon


def _joined(*parts: Sequence[JournalEvent]) -> list[JournalEvent]:
    """Events of several lists, read when asked: the lists fill while a rewrite's batches are made."""
    return [event for part in parts for event in part]
