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

from fastavro.validation import ValidationError, validate

from streaming.log.config import LogConfig
from streaming.log.record import LogRecord, lag_timestamp, parsed_schema, record_size
from streaming.log.segment import (CLEANED_SUFFIX, HDR_BASE, HDR_CLEAN, HDR_NEXT, META_SUFFIX, SEGMENT_SUFFIX,
                                   SWAP_SUFFIX, BlockEncoder, CorruptSegmentError, SegmentMeta, iter_verified,
                                   meta_name, read_header, rebuild_meta, segment_name, size_damage)
from streaming.log.storage import LocalStorage, Storage

log = logging.getLogger(__name__)

LOG_STATE = "log.json"
TMP_SUFFIX = ".tmp"


def explain_bad_record(record: object, exc: Exception) -> str:
    """Name the field at fault: the schema validator says which, where the hot path only saw a TypeError."""
    if not isinstance(record, dict):
        return f"not a log record: expected a dict, got {type(record).__name__}"
    try:
        validate(record, parsed_schema(), raise_errors=True)
    except ValidationError as verr:
        return f"does not fit the log schema: {'; '.join(str(e) for e in verr.errors)}"
    return f"{type(exc).__name__}: {exc}"


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
        self._encoder: BlockEncoder | None = None
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

    def append(self, records: Sequence[LogRecord], now_ms: int | None = None) -> AppendResult:
        """Append records in increasing offset order; offsets below the log end are skipped (replays).
        ``now_ms`` is the append time (default: the wall clock), see record.lag_timestamp."""
        result = AppendResult()
        now = int(time.time() * 1000) if now_ms is None else now_ms
        start = 0
        while start < len(records):
            start = self._append_into_active(records, start, result, now)
        return result

    def _append_into_active(self, records: Sequence[LogRecord], start: int, result: AppendResult, now: int) -> int:
        """Write records[start:] until the active segment must roll; return the index to resume from."""
        seg = self.active
        ceiling = now + self.config.timestamp_after_max_ms
        enc = self._active_encoder()
        segment_bytes = self.config.segment_bytes
        roll_after = self.roll_after_ms
        observe = seg.observe
        write = enc.write
        appended0, skipped0, odd0 = result.appended, result.skipped, result.odd_timestamps
        i = start
        n = len(records)
        try:
            while i < n:
                r = records[i]
                offset = r["offset"]
                if offset < seg.next_offset:
                    result.skipped += 1
                    i += 1
                    continue
                size = record_size(r)
                ts = r["timestamp"]
                if not 0 <= ts <= ceiling:  # record.lag_timestamp, inlined: a call per record costs 3%
                    ts = now
                    result.odd_timestamps += 1
                if seg.record_count and (seg.size_bytes + size > segment_bytes or ts - seg.first_timestamp > roll_after):
                    result.appended += i - start - (result.skipped - skipped0)
                    self._flush_active(enc, seg)
                    self._roll(offset)
                    result.rolled += 1
                    return i
                write(r)
                observe(r, size, ts)
                i += 1
        except Exception as exc:
            # The encoder may hold half of the bad record: drop it, return to the durable state, and
            # store the good prefix again so nothing accepted before the bad record is lost.
            result.appended, result.skipped, result.odd_timestamps = appended0, skipped0, odd0
            self._reload_active()
            self._append_into_active(records[:i], start, result, now)
            bad = records[i]
            offset = bad.get("offset") if isinstance(bad, dict) else None
            raise BadRecordError(offset, explain_bad_record(bad, exc), result.appended) from exc
        result.appended += i - start - (result.skipped - skipped0)
        self._flush_active(enc, seg)
        return i

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
        self._encoder = None
        seg = SegmentMeta(base_offset=base_offset, next_offset=base_offset)
        self._create_segment_file(seg)
        self._segments.append(seg)

    def _active_encoder(self) -> BlockEncoder:
        if self._encoder is None:
            with self.storage.open_read(self.path(segment_name(self.active.base_offset))) as f:
                _, sync, _ = read_header(f)
            self._encoder = BlockEncoder(sync_marker=sync)
        return self._encoder

    def _flush_active(self, enc: BlockEncoder, seg: SegmentMeta) -> None:
        data = enc.take()
        if not data:
            return
        try:
            self.storage.append(self.path(segment_name(seg.base_offset)), data)
            seg.file_bytes += len(data)
            seg.crc32 = zlib.crc32(data, seg.crc32)
            self._write_meta(seg)
        except BaseException:
            # A failed write (disk full, I/O error) may leave a torn block: go back to what the file
            # holds, cutting the torn part, so memory never claims records the disk does not have.
            self._reload_active()
            raise

    def _reload_active(self) -> None:
        """Forget unflushed state of the active segment: re-read its durable metadata."""
        self._encoder = None
        base = self.active.base_offset
        self._segments[-1] = self._load_segment(base, last=True)

    def _create_segment_file(self, seg: SegmentMeta, header_meta: dict[str, str] | None = None) -> None:
        enc = BlockEncoder(metadata={HDR_BASE: str(seg.base_offset), **(header_meta or {})})
        tmp = self.path(segment_name(seg.base_offset) + TMP_SUFFIX)
        self.storage.write(tmp, enc.header)
        self.storage.rename(tmp, self.path(segment_name(seg.base_offset)))
        seg.file_bytes = len(enc.header)
        seg.crc32 = zlib.crc32(enc.header)
        self._write_meta(seg)

    def _write_meta(self, seg: SegmentMeta) -> None:
        tmp = self.path(meta_name(seg.base_offset) + TMP_SUFFIX)
        self.storage.write(tmp, seg.to_json())
        self.storage.rename(tmp, self.path(meta_name(seg.base_offset)))

    # ----- read ---------------------------------------------------------------------------------------------

    def read(self, from_offset: int = 0) -> Iterator[LogRecord]:
        """Records with offset >= from_offset; an offset removed by cleaning starts at the next present one."""
        bases = [s.base_offset for s in self._segments]
        first = max(0, bisect.bisect_right(bases, from_offset) - 1)
        for seg in self._segments[first:]:
            if seg.last_offset is None or seg.last_offset < from_offset:
                continue
            for r in self.read_segment(seg):
                if r["offset"] >= from_offset:
                    yield r

    def read_segment(self, seg: SegmentMeta) -> Iterator[LogRecord]:
        """All records of a segment, its bytes checked first: raises CorruptSegmentError on damage."""
        return iter_verified(self.storage, self.path(segment_name(seg.base_offset)), seg)

    # ----- replace (the cleaner's swap) -------------------------------------------------------------------

    def replace(self, old: Sequence[SegmentMeta], records: Iterable[LogRecord], clean: bool = True,
                now_ms: int | None = None) -> SegmentMeta:
        """Swap consecutive sealed segments for one segment of the given records, crash-safely.

        The new segment keeps the first old segment's base offset and the last one's next offset, so
        offsets and the log end are unchanged whatever the cleaner removed.
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
        enc = BlockEncoder(metadata={HDR_BASE: str(base), HDR_NEXT: str(nxt), HDR_CLEAN: "1" if clean else "0"})
        final = self.path(segment_name(base))
        cleaned = final + CLEANED_SUFFIX
        now = int(time.time() * 1000) if now_ms is None else now_ms
        try:
            written, crc = self._write_cleaned(cleaned, enc, new, records, base, nxt, now)
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

    def _write_cleaned(self, cleaned: str, enc: BlockEncoder, new: SegmentMeta, records: Iterable[LogRecord],
                       base: int, nxt: int, now: int) -> tuple[int, int]:
        after_max = self.config.timestamp_after_max_ms
        with self.storage.open_write(cleaned) as f:
            f.write(enc.header)
            written = len(enc.header)
            crc = zlib.crc32(enc.header)
            last = base - 1
            for r in records:
                off = r["offset"]
                if off <= last or off >= nxt:
                    raise ValueError(f"replacement record offset {off} outside ({last}, {nxt}) or out of order")
                last = off
                enc.write(r)
                new.observe(r, record_size(r), lag_timestamp(r["timestamp"], now, after_max))
                if new.record_count % 4096 == 0:
                    chunk = enc.take()
                    f.write(chunk)
                    written += len(chunk)
                    crc = zlib.crc32(chunk, crc)
            chunk = enc.take()
            f.write(chunk)
            written += len(chunk)
            crc = zlib.crc32(chunk, crc)
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
