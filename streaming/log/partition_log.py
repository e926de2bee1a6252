"""The compactor's copy of one source partition: a directory of segments named by base offset.

Kafka's semantics where they matter to users: offsets are the source's and never change, appends are
idempotent by offset (a replayed micro-batch is skipped), segments roll on size, on record time
(segment.ms less a jitter drawn once per partition) and, with a wall clock, on max.compaction.lag.ms even
when nothing arrives (KIP-354's forced roll, which Kafka itself only checks on append). Cleaned segments
replace old ones through Kafka's .cleaned -> .swap -> rename sequence, completed or discarded on open.
"""

from __future__ import annotations

import bisect
import json
import logging
import os
import random
import time
import zlib
from dataclasses import dataclass, field
from typing import Iterable, Iterator, Sequence

import numpy as np
import pyarrow as pa
from fastavro.validation import ValidationError, validate, validate_many

from streaming.log.columns import batch_from_records, iter_records, lag_timestamps, offsets_of, record_sizes
from streaming.log.config import LogConfig
from streaming.log.record import LogRecord, parsed_schema
from streaming.log.segment import (CLEANED_SUFFIX, HDR_BASE, HDR_CLEAN, HDR_NEXT, META_SUFFIX, SEGMENT_SUFFIX,
                                   SWAP_SUFFIX, SYNC_SIZE, CorruptSegmentError, SegmentMeta, container_header,
                                   encode_blocks, meta_name, read_batches, read_header, read_keys_checked,
                                   read_verified, rebuild_meta, segment_name, size_damage)
from streaming.log.storage import LocalStorage, Storage

log = logging.getLogger(__name__)

LOG_STATE = "log.json"
TMP_SUFFIX = ".tmp"
ROOM_WINDOW = 1024  # records scanned at first for the next roll point


def schema_error(record: object) -> str | None:
    """What keeps a record out of the log, naming the field at fault; None when it fits the schema."""
    if not isinstance(record, dict):
        return f"not a log record: expected a dict, got {type(record).__name__}"
    if validate(record, parsed_schema(), raise_errors=False):
        return None
    try:  # raise_errors=True names the field, but costs a JSON dump per union branch tried
        validate(record, parsed_schema(), raise_errors=True)
    except ValidationError as verr:
        return f"does not fit the log schema: {'; '.join(str(e) for e in verr.errors)}"
    return None


class BadRecordError(ValueError):
    """A record the log cannot store. Records before it in the same append were stored."""

    def __init__(self, offset: object, reason: str, accepted: int) -> None:
        super().__init__(f"record at offset {offset!r} rejected: {reason} ({accepted} earlier records stored)")
        self.offset = offset
        self.reason = reason
        self.accepted = accepted


@dataclass
class AppendResult:
    appended: int = 0
    skipped: int = 0
    rolled: int = 0
    odd_timestamps: int = 0  # negative or too far ahead: their append time drives rolls and lags


@dataclass
class RecoveryReport:
    """What opening the log had to repair; empty when the last close was clean."""

    truncated: dict[str, int] = field(default_factory=dict)   # segment file -> bytes cut
    rebuilt: list[str] = field(default_factory=list)
    discarded: list[str] = field(default_factory=list)
    completed_swaps: list[str] = field(default_factory=list)
    damaged: dict[str, str] = field(default_factory=dict)  # segment file -> what is wrong (never repaired)

    def __bool__(self) -> bool:
        return bool(self.truncated or self.rebuilt or self.discarded or self.completed_swaps or self.damaged)


class PartitionLog:
    def __init__(self, directory: str, config: LogConfig | None = None, storage: Storage | None = None,
                 jitter_seed: int | str | None = None) -> None:
        self.dir = directory
        self.config = config or LogConfig()
        self.storage: Storage = storage or LocalStorage(fsync=self.config.fsync)
        self.storage.makedirs(directory)
        self.recovery = RecoveryReport()
        self.jitter_ms = self._load_jitter(jitter_seed if jitter_seed is not None else directory)
        self._segments: list[SegmentMeta] = []
        self._sync: bytes | None = None  # the active segment's sync marker, read once
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
    def roll_after_ms(self) -> int:
        return self.config.roll_ms - self.jitter_ms

    @property
    def damaged(self) -> dict[str, str]:
        """Segments whose files no longer match their sidecars: the log still takes appends, but cannot be
        cleaned until an operator restores or removes them."""
        return dict(self.recovery.damaged)

    def path(self, name: str) -> str:
        return os.path.join(self.dir, name)

    # ----- append and roll ---------------------------------------------------------------------------------

    def append(self, records: Sequence[LogRecord] | pa.RecordBatch, now_ms: int | None = None) -> AppendResult:
        """Append records (dicts, or a batch of LOG_BATCH_SCHEMA) in increasing offset order; offsets below
        the log end are skipped (replays). ``now_ms`` is the append time (default: the wall clock), see
        columns.lag_timestamps. A dict that does not fit the schema raises BadRecordError after the records
        before it are stored."""
        now = int(time.time() * 1000) if now_ms is None else now_ms
        if isinstance(records, pa.RecordBatch):
            return self._append_batch(records, now)
        if all(isinstance(r, dict) for r in records) and validate_many(records, parsed_schema(), raise_errors=False):
            return self._append_batch(batch_from_records(records), now)
        bad, why = next((i, e) for i, e in enumerate(map(schema_error, records)) if e is not None)
        result = self._append_batch(batch_from_records(records[:bad]), now)
        r = records[bad]
        raise BadRecordError(r.get("offset") if isinstance(r, dict) else None, why, result.appended)

    def _append_batch(self, batch: pa.RecordBatch, now: int) -> AppendResult:
        result = AppendResult()
        if batch.num_rows == 0:
            return result
        off = offsets_of(batch)
        before = np.maximum.accumulate(np.concatenate(([self.active.next_offset - 1], off[:-1])))
        fresh = off > before  # above the log end and above every earlier record of the batch
        result.skipped = int(len(off) - fresh.sum())
        if result.skipped:
            batch, off = batch.filter(pa.array(fresh)), off[fresh]
        sizes = record_sizes(batch)
        lag = lag_timestamps(batch, now, self.config.timestamp_after_max_ms)
        result.odd_timestamps = int((lag != batch.column("timestamp").to_numpy(zero_copy_only=False)).sum())
        i = 0
        while i < len(off):
            seg = self.active
            j = self._room(seg, sizes, lag, i)
            if j > i:
                self._write_active(seg, batch.slice(i, j - i), sizes[i:j], lag[i:j])
                result.appended += j - i
                i = j
            if i < len(off):
                self._roll(int(off[i]))
                result.rolled += 1
        return result

    def _room(self, seg: SegmentMeta, sizes: np.ndarray, lag: np.ndarray, i: int) -> int:
        """The index of the first record from i on that must start a new segment (segment.bytes, or its lag
        timestamp more than segment.ms less the jitter after the segment's first); len(sizes) if none. The
        scan window doubles until it finds the end, so a batch costs O(records), not O(records x rolls)."""
        first = seg.first_timestamp if seg.record_count else lag[i]
        window = ROOM_WINDOW
        while True:
            stop = min(len(sizes), i + window)
            after = seg.size_bytes + np.cumsum(sizes[i:stop])
            full = (after > self.config.segment_bytes) | (lag[i:stop] - first > self.roll_after_ms)
            if not seg.record_count:
                full[0] = False  # an empty segment takes its first record, however large
            if full.any():
                return i + int(np.argmax(full))
            if stop == len(sizes):
                return stop
            window *= 2

    def _write_active(self, seg: SegmentMeta, batch: pa.RecordBatch, sizes: np.ndarray, lag: np.ndarray) -> None:
        data = encode_blocks(batch, self._active_sync())
        try:
            self.storage.append(self.path(segment_name(seg.base_offset)), data)
            seg.file_bytes += len(data)
            seg.crc32 = zlib.crc32(data, seg.crc32)
            seg.observe(batch, sizes, lag)
            self._write_meta(seg)
        except BaseException:
            # A failed write (disk full, I/O error) may leave a torn block: go back to what the file
            # holds, cutting the torn part, so memory never claims records the disk does not have.
            self._reload_active()
            raise

    def maybe_roll(self, now_ms: int) -> bool:
        """KIP-354 forced roll: the active segment's first record is older than max.compaction.lag.ms."""
        seg = self.active
        if seg.record_count and now_ms - seg.first_timestamp > self.config.max_compaction_lag_ms:
            self._roll(seg.next_offset)
            return True
        return False

    def roll(self) -> None:
        """Seal the active segment (if it holds records) and start an empty one at the log end."""
        if self.active.record_count:
            self._roll(self.active.next_offset)

    def _roll(self, base_offset: int) -> None:
        base_offset = max(base_offset, self.active.next_offset)
        self._sync = None
        seg = SegmentMeta(base_offset=base_offset, next_offset=base_offset)
        self._create_segment_file(seg)
        self._segments.append(seg)

    def _active_sync(self) -> bytes:
        if self._sync is None:
            with self.storage.open_read(self.path(segment_name(self.active.base_offset))) as f:
                _, self._sync, _ = read_header(f)
        return self._sync

    def _reload_active(self) -> None:
        """Forget unflushed state of the active segment: re-read its durable metadata."""
        self._sync = None
        base = self.active.base_offset
        self._segments[-1] = self._load_segment(base, last=True)

    def _create_segment_file(self, seg: SegmentMeta, header_meta: dict[str, str] | None = None) -> None:
        header = container_header(metadata={HDR_BASE: str(seg.base_offset), **(header_meta or {})})
        tmp = self.path(segment_name(seg.base_offset) + TMP_SUFFIX)
        self.storage.write(tmp, header)
        self.storage.rename(tmp, self.path(segment_name(seg.base_offset)))
        seg.file_bytes = len(header)
        seg.crc32 = zlib.crc32(header)
        self._write_meta(seg)

    def _write_meta(self, seg: SegmentMeta) -> None:
        tmp = self.path(meta_name(seg.base_offset) + TMP_SUFFIX)
        self.storage.write(tmp, seg.to_json())
        self.storage.rename(tmp, self.path(meta_name(seg.base_offset)))

    # ----- read ---------------------------------------------------------------------------------------------

    def read(self, from_offset: int = 0) -> Iterator[LogRecord]:
        """Records with offset >= from_offset; an offset removed by cleaning starts at the next present one."""
        return iter_records(self.read_batches(from_offset))

    def read_batches(self, from_offset: int = 0) -> Iterator[pa.RecordBatch]:
        """read() as batches of LOG_BATCH_SCHEMA."""
        bases = [s.base_offset for s in self._segments]
        first = max(0, bisect.bisect_right(bases, from_offset) - 1)
        for seg in self._segments[first:]:
            if seg.last_offset is None or seg.last_offset < from_offset:
                continue
            for batch in self.segment_batches(seg):
                off = offsets_of(batch)
                if off[0] < from_offset:
                    batch = batch.slice(int(np.searchsorted(off, from_offset)))
                if batch.num_rows:
                    yield batch

    def segment_batches(self, seg: SegmentMeta, check: bool = True) -> Iterator[pa.RecordBatch]:
        """All records of a segment, its bytes checked first: raises CorruptSegmentError on damage. A
        reader that has just checked them (segment_keys read to the end) passes check=False."""
        path = self.path(segment_name(seg.base_offset))
        return read_verified(self.storage, path, seg) if check else read_batches(self.storage, path)

    def segment_keys(self, seg: SegmentMeta) -> Iterator[pa.RecordBatch]:
        """A segment's key columns (KEY_BATCH_SCHEMA), its bytes checked as they are read: damage raises
        CorruptSegmentError after the last batch, so a caller must act on nothing before the end."""
        return read_keys_checked(self.storage, self.path(segment_name(seg.base_offset)), seg)

    # ----- replace (the cleaner's swap) -------------------------------------------------------------------

    def replace(self, old: Sequence[SegmentMeta], batches: Iterable[pa.RecordBatch], clean: bool = True) -> SegmentMeta:
        """Swap consecutive sealed segments for one segment of the given records (batches of
        LOG_BATCH_SCHEMA, in offset order), crash-safely.

        The new segment keeps the first old segment's base offset and the last one's next offset, so
        offsets and the log end are unchanged whatever the cleaner removed. No record counts as written
        later than the old segments' latest time, and one without a usable timestamp counts as written
        then, not at the rewrite (as Kafka's cleaned segment keeps its source's last-modified time): a
        rewrite must not make a record young again, or min.compaction.lag.ms would hold it back after
        every pass.
        """
        if not old:
            raise ValueError("replace needs at least one segment")
        idx = self._index_of(old[0])
        if self._segments[idx: idx + len(old)] != list(old):
            raise ValueError("replace takes consecutive segments of this log, in order")
        if idx + len(old) >= len(self._segments):
            raise ValueError("the active segment cannot be replaced")
        base, nxt = old[0].base_offset, old[-1].next_offset
        new = SegmentMeta(base_offset=base, next_offset=nxt, clean=clean)
        header = container_header(metadata={HDR_BASE: str(base), HDR_NEXT: str(nxt), HDR_CLEAN: "1" if clean else "0"})
        final = self.path(segment_name(base))
        cleaned = final + CLEANED_SUFFIX
        written_at = max((s.largest_timestamp for s in old if s.largest_timestamp is not None), default=0)
        try:
            written, crc = self._write_cleaned(cleaned, header, new, batches, base, nxt, written_at)
        except BaseException:
            self.storage.delete(cleaned)  # give the space back now (a disk-full pass), not at the next open
            raise
        new.file_bytes = written
        new.crc32 = crc
        self.storage.rename(cleaned, final + SWAP_SUFFIX)
        self._complete_swap(base, nxt)
        self._write_meta(new)
        self._segments[idx: idx + len(old)] = [new]
        return new

    def _write_cleaned(self, cleaned: str, header: bytes, new: SegmentMeta, batches: Iterable[pa.RecordBatch],
                       base: int, nxt: int, written_at: int) -> tuple[int, int]:
        after_max = self.config.timestamp_after_max_ms
        sync = header[-SYNC_SIZE:]
        with self.storage.open_write(cleaned) as f:
            f.write(header)
            written = len(header)
            crc = zlib.crc32(header)
            last = base - 1
            for batch in batches:
                if not batch.num_rows:
                    continue
                off = offsets_of(batch)
                if off[0] <= last or off[-1] >= nxt or (len(off) > 1 and (np.diff(off) <= 0).any()):
                    raise ValueError(f"replacement records [{off[0]}, {off[-1]}] not in ({last}, {nxt}) or out of order")
                last = int(off[-1])
                data = encode_blocks(batch, sync)
                f.write(data)
                written += len(data)
                crc = zlib.crc32(data, crc)
                new.observe(batch, record_sizes(batch), np.minimum(lag_timestamps(batch, written_at, after_max), written_at))
        return written, crc

    def _complete_swap(self, base: int, nxt: int) -> None:
        """Drop every old segment in [base, nxt), then move the swap file into place."""
        for name in self.storage.listdir(self.dir):
            if name.endswith(SEGMENT_SUFFIX) or name.endswith(META_SUFFIX):
                b = int(name.split(".", 1)[0])
                if base <= b < nxt:
                    self.storage.delete(self.path(name))
        self.storage.rename(self.path(segment_name(base) + SWAP_SUFFIX), self.path(segment_name(base)))

    def _index_of(self, seg: SegmentMeta) -> int:
        for i, s in enumerate(self._segments):
            if s.base_offset == seg.base_offset:
                return i
        raise ValueError(f"segment at base offset {seg.base_offset} is not in {self.dir}")

    # ----- open and recovery -------------------------------------------------------------------------------

    def _load_jitter(self, seed: int | str) -> int:
        state_path = self.path(LOG_STATE)
        want = min(self.config.segment_jitter_ms, self.config.roll_ms)
        if self.storage.exists(state_path):
            state = json.loads(self.storage.read(state_path))
            if state.get("segment_jitter_ms") == want:
                return int(state["jitter_ms"])
        jitter = random.Random(str(seed)).randrange(want) if want > 0 else 0
        tmp = state_path + TMP_SUFFIX
        self.storage.write(tmp, json.dumps({"segment_jitter_ms": want, "jitter_ms": jitter}).encode())
        self.storage.rename(tmp, state_path)
        return jitter

    def _open(self) -> None:
        names = self.storage.listdir(self.dir)
        for name in names:
            if name.endswith(CLEANED_SUFFIX) or name.endswith(TMP_SUFFIX):
                self.storage.delete(self.path(name))
                self.recovery.discarded.append(name)
        for name in names:
            if name.endswith(SEGMENT_SUFFIX + SWAP_SUFFIX):
                with self.storage.open_read(self.path(name)) as f:
                    hdr, _, _ = read_header(f)
                base, nxt = int(hdr[HDR_BASE]), int(hdr[HDR_NEXT])
                self._complete_swap(base, nxt)
                self.recovery.completed_swaps.append(name)
        bases = sorted(int(n[: -len(SEGMENT_SUFFIX)]) for n in self.storage.listdir(self.dir)
                       if n.endswith(SEGMENT_SUFFIX))
        self._segments = [self._load_segment(b, last=(i == len(bases) - 1)) for i, b in enumerate(bases)]
        for prev, nxt in zip(self._segments, self._segments[1:]):
            if prev.next_offset > nxt.base_offset:
                raise CorruptSegmentError(f"{self.dir}: segment {prev.base_offset} ends at {prev.next_offset}, "
                                          f"past the next segment's base {nxt.base_offset}")
        if not self._segments:
            seg = SegmentMeta(base_offset=0, next_offset=0)
            self._create_segment_file(seg)
            self._segments.append(seg)
        elif segment_name(self.active.base_offset) in self.recovery.damaged:
            self._roll(self.active.next_offset)  # appends go on in a fresh segment; the damaged one stays as is
        if self.recovery.damaged:
            log.error("log %s has damaged segments (not cleanable until restored or removed): %s",
                      self.dir, self.recovery.damaged)
        if self.recovery:
            log.warning("recovered log %s: %s", self.dir, self.recovery)

    def _load_segment(self, base: int, last: bool) -> SegmentMeta:
        """The segment's sidecar when it matches the file. Only the active (last) segment may have grown
        past it (a crash between data and sidecar write): it is rebuilt. A file shorter than its sidecar,
        or a sealed segment of another length, lost or gained bytes after they were written: damage,
        recorded and left as it is, since cutting it would silently drop accepted records."""
        seg_path = self.path(segment_name(base))
        meta_path = self.path(meta_name(base))
        size = self.storage.size(seg_path)
        if self.storage.exists(meta_path):
            try:
                meta = SegmentMeta.from_json(self.storage.read(meta_path))
            except (ValueError, TypeError):
                meta = None
            if meta is not None and meta.base_offset == base:
                damage = size_damage(meta, size, last)
                if damage:
                    self.recovery.damaged[segment_name(base)] = damage
                if damage or size == meta.file_bytes:
                    return meta
        meta, cut = rebuild_meta(self.storage, seg_path, base, self.config.timestamp_after_max_ms)
        if cut:
            self.recovery.truncated[segment_name(base)] = cut
        self.recovery.rebuilt.append(segment_name(base))
        self._write_meta(meta)
        return meta
