"""The live state of a partition log: each key's winner under the topic's strategy, as of a point.

The cleaner keeps winners in the cleaned part and leaves the dirty part as appended, so the state is the
winner over the whole log, the same rule (KIP-280's rank: version, then offset) the cleaner's map applies.
A point in the past is exact only from the cleaner's checkpoint on: below it a pass kept each key's winner
up to the checkpoint and dropped the versions that were superseded there, so the state at an earlier
offset can no longer be told. Such a point is refused, naming the earliest exact one.

The keys are read first (hashes, offsets, versions: 32 bytes a record), then only the winners' full
records, so values are decoded once and memory holds keys, never values.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from streaming.cleaner.config import CompactionConfig
from streaming.log.key_hash import hash_keys
from streaming.cleaner.strategy import VersionReader
from streaming.errors import UserError
from streaming.log.columns import offsets_of
from streaming.log.manifest import Manifest
from streaming.log.segment_read import read_segment, read_segment_keys
from streaming.log.storage import Storage
from streaming.utc import utc_text


class AsOfError(UserError, ValueError):
    """An as-of point the log cannot answer exactly."""


@dataclass(frozen=True)
class AsOf:
    """A point of a partition's history: a source offset (the state holds the records below it) or a time
    (through the first offset whose timestamp is at or after it, as Kafka's ListOffsets answers)."""

    offset: int | None = None
    timestamp_ms: int | None = None

    def describe(self) -> str:
        if self.offset is not None:
            return f"offset {self.offset}"
        return f"time {utc_text(self.timestamp_ms, millis=True)} ({self.timestamp_ms} ms)"


@dataclass
class _Keys:
    """What the first read keeps of every keyed record, in offset order."""

    offset: np.ndarray
    timestamp: np.ndarray
    h1: np.ndarray
    h2: np.ndarray
    version: np.ndarray


def log_end(manifest: Manifest | None) -> int:
    return manifest.segments[-1].next_offset if manifest and manifest.segments else 0


def earliest_exact(manifest: Manifest | None) -> int:
    """The first offset whose state the log still holds exactly: the cleaner's checkpoint, or the log start
    when nothing was cleaned."""
    if manifest is None or not manifest.segments:
        return 0
    start = manifest.segments[0].base_offset
    return max(start, manifest.cleaner_checkpoint) if manifest.cleaner_checkpoint is not None else start


@dataclass
class Live:
    """A log's live state: the offset it stops below, and each key's winner (batches of LOG_BATCH_SCHEMA, in
    offset order) to be read once."""

    end: int
    batches: Iterator[pa.RecordBatch]


def live_records(storage: Storage, directory: str, manifest: Manifest | None, config: CompactionConfig,
                 as_of: AsOf | None = None, tombstones: bool = False, name: str = "") -> Live:
    """The state, tombstones included only when asked; ``name`` says which partition in an as-of refusal,
    raised (AsOfError) here, before any record is yielded."""
    if manifest is None:
        return Live(resolve_end(manifest, None, as_of, name), iter(()))
    keys = _read_keys(storage, directory, manifest, config)
    end = resolve_end(manifest, keys, as_of, name)
    return Live(end, _records(storage, directory, manifest, _winners(keys, end), end, tombstones))


def resolve_end(manifest: Manifest | None, keys: _Keys | None, as_of: AsOf | None, name: str) -> int:
    """The offset the state stops below, checked against what the log holds exactly. An as-of offset needs
    the manifest alone (``keys`` None), so a planner can check it before any record is read."""
    end, exact = log_end(manifest), earliest_exact(manifest)
    if as_of is None:
        return end
    if as_of.offset is not None:
        at = as_of.offset
        if at > end:
            raise AsOfError(f"{name}: as-of offset {at} is past the log's end {end}; the job has not read that "
                            f"far yet")
    else:
        # keyed records place the point: the cleaner drops keyless ones
        later = np.flatnonzero(keys.timestamp >= as_of.timestamp_ms) if keys is not None else []
        at = int(keys.offset[later[0]]) if len(later) else end
    if at < exact:
        hint = _exact_time(keys, exact) if keys is not None else ""
        raise AsOfError(f"{name}: as-of {as_of.describe()} is before the earliest exact point, offset {exact}"
                        f"{hint}: the cleaner has removed the versions superseded below it")
    return at


def _exact_time(keys: _Keys, exact: int) -> str:
    """The earliest time that resolves at or after ``exact``: just past every timestamp below it."""
    below = keys.timestamp[keys.offset < exact]
    return f" (asOfTimestamp {int(below.max()) + 1} or later)" if len(below) else ""


def _read_keys(storage: Storage, directory: str, manifest: Manifest, config: CompactionConfig) -> _Keys:
    reader = VersionReader(config)
    parts: list[tuple[np.ndarray, ...]] = []
    for seg in manifest.segments:
        for batch in read_segment_keys(storage, directory, seg):
            keyed = batch.filter(pc.is_valid(batch.column("key")))
            if not keyed.num_rows:
                continue
            h1, h2 = hash_keys(keyed.column("key"))
            version = reader.versions(keyed) if reader.versioned else np.zeros(keyed.num_rows, np.int64)
            parts.append((offsets_of(keyed), keyed.column("timestamp").to_numpy(zero_copy_only=False), h1, h2,
                          version))
    if not parts:
        empty = np.empty(0, np.int64)
        return _Keys(empty, empty, empty.astype(np.uint64), empty.astype(np.uint64), empty)
    return _Keys(*(np.concatenate(column) for column in zip(*parts, strict=True)))


def _winners(keys: _Keys, end: int) -> np.ndarray:
    """The sorted offsets of each key's best-ranked record below ``end``."""
    below = keys.offset < end
    offset, version, h1, h2 = keys.offset[below], keys.version[below], keys.h1[below], keys.h2[below]
    order = np.lexsort((offset, version, h2, h1))  # by key, then rank ascending: a key's last is its winner
    h1, h2 = h1[order], h2[order]
    last = np.ones(len(order), dtype=bool)
    last[:-1] = (h1[1:] != h1[:-1]) | (h2[1:] != h2[:-1])
    return np.sort(offset[order][last])


def _records(storage: Storage, directory: str, manifest: Manifest, winners: np.ndarray, end: int,
             tombstones: bool) -> Iterator[pa.RecordBatch]:
    for seg in manifest.segments:
        if seg.base_offset >= end or not len(winners):
            return
        if not seg.record_count:
            continue
        for batch in read_segment(storage, directory, seg, check=False):  # checked by the read of its keys
            off = offsets_of(batch)
            at = np.minimum(np.searchsorted(winners, off), len(winners) - 1)
            keep = (winners[at] == off) & (off < end)
            if not tombstones:
                keep &= batch.column("value").is_valid().to_numpy(zero_copy_only=False)
            if keep.any():
                yield batch.filter(pa.array(keep))
