"""The compactor's copy of one source partition: segments of immutable objects, described by manifests.

Kafka's semantics where they matter to users: offsets are the source's and never change, appends are
idempotent by offset (a replayed micro-batch is skipped), segments roll on size, on record time
(segment.ms less a jitter drawn once per partition) and, with a wall clock, on max.compaction.lag.ms even
when nothing arrives (KIP-354's forced roll, which Kafka itself only checks on append). Every change (an
append, a roll, a cleaned segment swapped in) is one commit of a new manifest (see manifest.py), so the
same code runs on a local directory and on an object store, and a crash at any point leaves the log as
the last commit described it (a power cut: the last durable one, see storage.Barrier).
"""

from __future__ import annotations

import bisect
import logging
import posixpath
import random
import time
from dataclasses import replace as replaced
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

import numpy as np
import pyarrow as pa
from fastavro.validation import validate_many

from streaming.log.columns import batch_from_records, iter_records, lag_timestamps, offsets_of, record_sizes
from streaming.log.config import LogConfig
from streaming.log.journal import Doc, JournalEvent, read_journal, write_entry
from streaming.log.legacy import has_legacy_log, take_over
from streaming.log.manifest import Manifest, collect_garbage, commit, garbage_due, load_newest, objects_dir
from streaming.log.read_hold import held
from streaming.log.record import BadRecordError, LogRecord, parsed_schema, schema_error
from streaming.log.reports import AppendResult, RecoveryReport
from streaming.log.segment import Chunk, SegmentMeta, object_damage, object_name, segment_name
from streaming.log.read_keep import ReadKeep
from streaming.log.segment_read import read_segment, read_segment_keys
from streaming.log.segment_writer import room, with_object, write_cleaned
from streaming.log.storage import Barrier, LocalStorage, Storage
from streaming.configuration.settings import LONG_MAX

log = logging.getLogger(__name__)

GC_EVERY = 32  # commits between garbage collections (replaced and folded objects, old manifests)

# What an append has to say of the records it stores (the fresh ones: replays are skipped before)
AppendJournal = Callable[[pa.RecordBatch], Sequence[JournalEvent]]


class PartitionLog:
    def __init__(self, directory: str, config: LogConfig | None = None, storage: Storage | None = None,
                 jitter_seed: int | str | None = None, barrier: Barrier | None = None,
                 keep: ReadKeep | None = None) -> None:
        """``barrier``: a local log's writes for its held commits are durable when it is crossed, not each as it is
        made (a commit made at once crosses it before and after its manifest); ``keep``: the task's (read_keep)."""
        self.dir = directory
        self.config = config or LogConfig()
        self._barrier = barrier if storage is None and self.config.fsync else None
        self.storage: Storage = storage or LocalStorage(fsync=self.config.fsync, barrier=self._barrier)
        self._keep = keep
        if self._barrier is not None:
            self._barrier.owe_directory(directory)
        self.recovery = RecoveryReport()
        want = min(self.config.segment_jitter_ms, self.config.roll_ms)
        seed = jitter_seed if jitter_seed is not None else directory
        self.jitter_ms = random.Random(str(seed)).randrange(want) if want > 0 else 0
        self._segments: list[SegmentMeta] = []
        self._checkpoint: int | None = None
        self._journal: str | None = None
        self._marks: dict[str, Any] = {}
        self._version = -1  # the manifest this writer's view is based on
        self._next_version = 0
        self._held: list[JournalEvent] | None = None  # while commits are held: the events they journal
        self._held_head: str | None = None  # the journal entry of held events written ahead of their manifest
        self._unsaved = False  # a change is held that no manifest has yet
        self._open()

    # ----- public view -------------------------------------------------------------------------------------

    @property
    def segments(self) -> list[SegmentMeta]:
        """Segments in offset order; the last one is the active segment."""
        return list(self._segments)

    @property
    def active(self) -> SegmentMeta:
        return self._segments[-1]

    @property
    def log_start_offset(self) -> int:
        return self._segments[0].base_offset

    @property
    def log_end_offset(self) -> int:
        """The next offset the log expects; survives cleaning because the active segment is never cleaned."""
        return self._segments[-1].next_offset

    @property
    def version(self) -> int:
        """The manifest version this log's view comes from (-1: nothing committed yet)."""
        return self._version

    @property
    def cleaner_checkpoint(self) -> int | None:
        """The cleaner's first dirty offset (Kafka's cleaner-offset-checkpoint), committed with the log."""
        return self._checkpoint

    @property
    def journal_head(self) -> str | None:
        """The newest journal object committed (one a held commit will write is not yet); None: none ever."""
        return self._journal

    @property
    def journal_marks(self) -> dict[str, Any]:
        """The small documents the last commit carried forward for the log's writers (see note())."""
        return dict(self._marks)

    def journal(self) -> list[Doc]:
        """Every event committed with this log, oldest first (see journal.py)."""
        return read_journal(self.storage, self.dir, self._journal)

    @property
    def damaged(self) -> dict[str, str]:
        """Segments whose objects no longer match the manifest: the log takes appends, not cleaning, until
        they are restored or removed."""
        return dict(self.recovery.damaged)

    def object_path(self, name: str) -> str:
        return posixpath.join(objects_dir(self.dir), name)

    # ----- append and roll ---------------------------------------------------------------------------------

    def append(self, records: Sequence[LogRecord] | pa.RecordBatch, now_ms: int | None = None,
               journal: AppendJournal | None = None) -> AppendResult:
        """Append records (dicts, or a batch of LOG_BATCH_SCHEMA) in increasing offset order; offsets below
        the log end are skipped (replays). ``now_ms`` is the append time (default: the wall clock), see
        columns.lag_timestamps. ``journal`` says what to journal of the records stored, with the same commit.
        A dict that does not fit the schema raises BadRecordError after the records before it are stored."""
        now = int(time.time() * 1000) if now_ms is None else now_ms
        if isinstance(records, pa.RecordBatch):
            return self._append_batch(records, now, journal)
        if all(isinstance(r, dict) for r in records) and validate_many(records, parsed_schema(), raise_errors=False):
            return self._append_batch(batch_from_records(records), now, journal)
        bad, why = next((i, e) for i, e in enumerate(map(schema_error, records)) if e is not None)
        result = self._append_batch(batch_from_records(records[:bad]), now, journal)
        r = records[bad]
        raise BadRecordError(r.get("offset") if isinstance(r, dict) else None, why, result.appended)

    def _append_batch(self, batch: pa.RecordBatch, now: int, journal: AppendJournal | None) -> AppendResult:
        """All of the batch or none of it: its objects are written first, then one manifest commits them."""
        result = AppendResult()
        if batch.num_rows == 0:
            return result
        off = offsets_of(batch)
        before = np.maximum.accumulate(np.concatenate(([self.active.next_offset - 1], off[:-1])))
        fresh = off > before  # above the log end and above every earlier record of the batch
        result.skipped = int(len(off) - fresh.sum())
        if result.skipped:
            batch, off = batch.filter(pa.array(fresh)), off[fresh]
        if not len(off):
            return result
        sizes = record_sizes(batch)
        lag = lag_timestamps(batch, now, self.config.message_timestamp_after_max_ms)
        result.odd_timestamps = int((lag != batch.column("timestamp").to_numpy(zero_copy_only=False)).sum())
        segments = self.segments
        if self._time_to_roll(segments[-1], int(lag.max())):
            segments.append(SegmentMeta.new(max(int(off[0]), segments[-1].next_offset)))
            result.rolled += 1
        i = 0
        while i < len(off):
            j = room(segments[-1], sizes, i, self.config.segment_bytes)
            if j > i:
                segments[-1] = with_object(self.storage, self.dir, segments[-1], batch.slice(i, j - i), sizes[i:j],
                                           lag[i:j])
                result.appended += j - i
                i = j
            if i < len(off):
                segments.append(SegmentMeta.new(max(int(off[i]), segments[-1].next_offset)))
                result.rolled += 1
        self._commit(segments, self._checkpoint, journal(batch) if journal else None)
        return result

    def _time_to_roll(self, seg: SegmentMeta, newest_ms: int) -> bool:
        """Kafka's time rule, checked once per append as Kafka checks it once per produce request: the append's
        latest lag timestamp is more than segment.ms (less the jitter; max.compaction.lag.ms when lower) after the
        active segment's first. An append is never split on time (appends a millisecond apart: not a segment each)."""
        return bool(seg.record_count) and newest_ms - seg.first_timestamp > self.config.roll_ms - self.jitter_ms

    def forced_roll_due(self, now_ms: int) -> bool:
        """KIP-354: the active segment's first record is older than max.compaction.lag.ms."""
        seg = self.active
        return bool(seg.record_count) and now_ms - seg.first_timestamp > self.config.max_compaction_lag_ms

    def maybe_roll(self, now_ms: int) -> bool:
        """The KIP-354 forced roll, when it is due."""
        return self.forced_roll_due(now_ms) and self.roll()

    def roll(self) -> bool:
        """Seal the active segment (if it holds records) and start an empty one at the log end."""
        if not self.active.record_count:
            return False
        self._commit([*self._segments, SegmentMeta.new(self.active.next_offset)], self._checkpoint)
        return True

    def describe_keys(self, filters: Mapping[int, str]) -> None:
        """Key filters (by base offset) of sealed segments a pass read whole: the log's next commit carries them."""
        self._segments = [replaced(s, key_filter=filters.get(s.base_offset, s.key_filter)) for s in self._segments]

    def set_cleaner_checkpoint(self, offset: int, journal: Sequence[JournalEvent] | None = None) -> None:
        if offset != self._checkpoint or journal:
            self._commit(self._segments, offset, journal)

    def note(self, events: Sequence[JournalEvent], marks: dict[str, Any] | None = None) -> None:
        """Journal what happened elsewhere to records of this log (its emission), with ``marks`` the next writer
        finds in journal_marks: how far such notes got (one lost to a crash is found), the cleaner's state."""
        if events or (marks and {**self._marks, **marks} != self._marks):
            self._commit(self._segments, self._checkpoint, events, marks)

    def hold_commits(self) -> None:
        """Until commit_held, every change stays in this writer's view, its objects written but no manifest: a
        compaction task commits a log's roll, passes and notes once a stage (see PartitionWork.commits_before_emission)."""
        if self._held is not None:
            raise RuntimeError(f"{self.dir}: its commits are held already")
        self._held = []

    def write_held_journal(self) -> None:
        """The journal entry of the events held so far, written ahead of their manifest: a task writes every
        log's objects and entries, crosses one barrier, then commits every log's manifest (commit_held)."""
        if self._held:
            previous = self._held_head or self._journal
            self._held_head = write_entry(self.storage, self.dir, self._next_version, previous, self._held)
            self._held = []

    def commit_held(self, hold_on: bool = False) -> None:
        """One manifest of every change held (none when nothing changed); ``hold_on``: the next ones are held."""
        if self._held:  # events held after write_held_journal: their entry is durable before its manifest names it
            self.write_held_journal()
            self._cross()
        held, self._held = self._held, None
        if held is not None and self._unsaved:
            self._unsaved = False
            head, self._held_head = self._held_head or self._journal, None
            self._publish(self._segments, self._checkpoint, head, self._marks)
        self._held = [] if hold_on else None

    def _commit(self, segments: list[SegmentMeta], checkpoint: int | None, events: Sequence[JournalEvent] | None = None,
                marks: dict[str, Any] | None = None) -> None:
        marks = {**self._marks, **(marks or {})}
        if self._held is not None:
            self._held.extend(events or ())
            self._segments, self._checkpoint, self._marks, self._unsaved = segments, checkpoint, marks, True
            return
        head = write_entry(self.storage, self.dir, self._next_version, self._journal, events) if events else self._journal
        self._cross()  # a commit made at once is durable as it returns, its objects before its manifest
        self._publish(segments, checkpoint, head, marks)
        self._cross()

    def _cross(self) -> None:
        if self._barrier is not None:
            self._barrier.cross()

    def _publish(self, segments: list[SegmentMeta], checkpoint: int | None, head: str | None,
                 marks: dict[str, Any]) -> None:
        version = self._next_version
        commit(self.storage, self.dir, Manifest(version, segments, checkpoint, head, marks), self._version)
        self._segments, self._checkpoint, self._journal, self._marks = segments, checkpoint, head, marks
        self._version, self._next_version = version, version + 1
        if version % GC_EVERY == 0:
            self._collect_quietly()

    def _collect_quietly(self) -> None:
        try:
            self.collect_garbage()
        except OSError as exc:  # housekeeping: the change is committed, the next round collects
            log.warning("%s: garbage collection failed, to be retried: %s", self.dir, exc)

    def collect_garbage(self, now_ms: int | None = None, grace_ms: int | None = None) -> int:
        """Delete what no recent manifest references, once older than file.delete.delay.ms (see
        manifest.collect_garbage)."""
        return collect_garbage(self.storage, self.dir, int(time.time() * 1000) if now_ms is None else now_ms,
                               self.config.file_delete_delay_ms if grace_ms is None else grace_ms)

    def collect_at_end(self) -> int:
        """The end of a run: only the newest manifest and its objects stay, unless a reader outside the job holds
        the log (read_hold), or an object no manifest named is younger than file.delete.delay.ms (a lost task's)."""
        now, grace = int(time.time() * 1000), self.config.file_delete_delay_ms
        if held(self.storage, self.dir, now, grace):
            return self.collect_garbage(now, grace)
        return collect_garbage(self.storage, self.dir, now, 0, keep=1, unnamed_grace_ms=grace)

    # ----- read ---------------------------------------------------------------------------------------------

    def read(self, from_offset: int = 0, to_offset: int | None = None) -> Iterator[LogRecord]:
        """Records with from_offset <= offset < to_offset (to the end when None); an offset removed by cleaning
        starts at the next present one."""
        return iter_records(self.read_batches(from_offset, to_offset))

    def read_batches(self, from_offset: int = 0, to_offset: int | None = None) -> Iterator[pa.RecordBatch]:
        """read() as batches of LOG_BATCH_SCHEMA."""
        end = LONG_MAX if to_offset is None else to_offset
        bases = [s.base_offset for s in self._segments]
        first = max(0, bisect.bisect_right(bases, from_offset) - 1)
        for seg in self._segments[first:]:
            if seg.base_offset >= end:
                return
            if seg.last_offset is None or seg.last_offset < from_offset:
                continue
            for batch in self.segment_batches(seg):
                off = offsets_of(batch)
                if off[-1] < from_offset:
                    continue
                if off[0] >= end:
                    return
                lo = int(np.searchsorted(off, from_offset)) if off[0] < from_offset else 0
                hi = int(np.searchsorted(off, end)) if off[-1] >= end else len(off)
                if lo or hi < len(off):
                    batch = batch.slice(lo, hi - lo)
                if batch.num_rows:
                    yield batch

    def segment_batches(self, seg: SegmentMeta, check: bool = True) -> Iterator[pa.RecordBatch]:
        """All records of a segment (read_segment); check=False: its bytes were just checked (segment_keys)."""
        return read_segment(self.storage, self.dir, seg, check, self._keep)

    def segment_keys(self, seg: SegmentMeta) -> Iterator[pa.RecordBatch]:
        """A segment's key columns (KEY_BATCH_SCHEMA), its bytes checked as they are read: damage raises
        CorruptSegmentError after the last batch of an object, so a caller must act on nothing before the end."""
        return read_segment_keys(self.storage, self.dir, seg, self._keep)

    # ----- replace (the cleaner's swap) -------------------------------------------------------------------

    def replace(self, old: Sequence[SegmentMeta], batches: Iterable[pa.RecordBatch], clean: bool = True,
                journal: Callable[[], Sequence[JournalEvent]] | None = None,
                checkpoint: int | None = None) -> SegmentMeta:
        """Swap consecutive sealed segments for one segment of the given records (batches of
        LOG_BATCH_SCHEMA, in offset order): a new object, then a manifest that holds it instead of theirs.

        The new segment keeps the first old segment's base offset and the last one's next offset, so
        offsets and the log end are unchanged whatever the cleaner removed. No record counts as written
        later than the old segments' latest time, and one without a usable timestamp counts as written
        then, not at the rewrite (as Kafka's cleaned segment keeps its source's last-modified time): a
        rewrite must not make a record young again, or min.compaction.lag.ms would hold it back after
        every pass. ``journal`` is asked for its events once the batches are written: their producer may make
        them on the way. ``checkpoint``: a cleaner checkpoint committed with the swap (None: the log's stays), so
        a pass's rewrite and its checkpoint are one commit.
        """
        if not old:
            raise ValueError("replace needs at least one segment")
        idx = self._index_of(old[0])
        if self._segments[idx: idx + len(old)] != list(old):
            raise ValueError("replace takes consecutive segments of this log, in order")
        if idx + len(old) >= len(self._segments):
            raise ValueError("the active segment cannot be replaced")
        new = SegmentMeta.new(old[0].base_offset, old[-1].next_offset, clean=clean)
        written_at = max((s.largest_timestamp for s in old if s.largest_timestamp is not None), default=0)
        name = object_name(new.base_offset)
        with self.storage.open_put(self.object_path(name)) as f:
            written, crc = write_cleaned(f, new, batches, written_at, self.config.message_timestamp_after_max_ms)
        if new.record_count:
            new.chunks = (Chunk(name, written, crc),)
        else:  # the cleaner removed every record: the segment needs no object
            self.storage.delete(self.object_path(name))
        self._commit([*self._segments[:idx], new, *self._segments[idx + len(old):]],
                     self._checkpoint if checkpoint is None else checkpoint, journal() if journal else None)
        return new

    def _index_of(self, seg: SegmentMeta) -> int:
        for i, s in enumerate(self._segments):
            if s.base_offset == seg.base_offset:
                return i
        raise ValueError(f"segment at base offset {seg.base_offset} is not in {self.dir}")

    # ----- open ---------------------------------------------------------------------------------------------

    def _open(self) -> None:
        loaded = load_newest(self.storage, self.dir)
        if loaded.newest_version < 0 and has_legacy_log(self.storage, self.dir):
            # the take-over deletes the old files once its objects and manifest are written: each synced first
            durable = self.storage if self._barrier is None else LocalStorage(fsync=True)
            loaded.manifest, loaded.newest_version = take_over(durable, self.dir), 0
        self.recovery.invalid_manifests = loaded.invalid
        self._next_version = loaded.newest_version + 1
        if loaded.manifest is not None:
            self._version = loaded.manifest.version
            self._segments = loaded.manifest.segments
            self._checkpoint = loaded.manifest.cleaner_checkpoint
            self._journal, self._marks = loaded.manifest.journal, loaded.manifest.marks
            objects = self.storage.list(objects_dir(self.dir))
            self.recovery.damaged = object_damage(self._segments, {i.name: i.size for i in objects})
            if garbage_due(loaded, objects, int(time.time() * 1000), self.config.file_delete_delay_ms):
                self._collect_quietly()  # what earlier runs replaced or left: a quiet log may not commit 32 times more
        if not self._segments:
            self._segments = [SegmentMeta.new(0)]
        elif segment_name(self.active.base_offset) in self.recovery.damaged:
            # appends go on in a fresh segment; the damaged one stays as it is
            self._segments = [*self._segments, SegmentMeta.new(self.active.next_offset)]
        if self.recovery.damaged:
            log.error("log %s has damaged segments (not cleanable until restored or removed): %s",
                      self.dir, self.recovery.damaged)
        if self.recovery:
            log.warning("opened log %s at manifest version %d: %s", self.dir, self._version, self.recovery)
