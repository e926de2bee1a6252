"""The compaction rules in a few lines, as the reference the cleaner is tested against: which part of a log
is cleanable now and whether a pass should run (the rules of Kafka's LogCleanerManager, written from
kafka-cleaner-facts.md), where a pass with a given dedupe buffer stops, and what a pass keeps."""

from __future__ import annotations

from dataclasses import dataclass

MIN_LONG = -(2**63)
LOAD_FACTOR = 0.9
HASH_AND_OFFSET_BYTES = 24  # an offset-map slot: 16 bytes of MD5, 8 of offset
VERSION_BYTES = 8           # and the winner's version under a version strategy


def rank(r: dict, strategy: str, header: str | None) -> tuple[int, int]:
    if strategy == "offset":
        return (0, r["offset"])
    if strategy == "timestamp":
        return (r["timestamp"], r["offset"])
    values = [h["value"] for h in r["headers"] if h["key"] == header]
    v = values[-1] if values else None
    version = int.from_bytes(v, "big", signed=True) if v is not None and len(v) == 8 else MIN_LONG
    return (version, r["offset"])


@dataclass(frozen=True)
class Segment:
    """What selection may know of a segment without reading it (as Kafka's selection reads segment metadata)."""

    base: int
    next: int
    size: int
    first_ts: int | None     # the first record's time (lags count from it)
    largest_ts: int | None   # the latest record time in it


@dataclass(frozen=True)
class Selection:
    first_dirty: int
    first_uncleanable: int
    ratio: float
    overdue: bool           # KIP-354: a dirty record older than max.compaction.lag.ms
    tombstones_due: bool    # KIP-534: a kept tombstone's horizon has passed
    eligible: bool


def select(segments: list[Segment], records: list[dict], checkpoint: int | None, now: int, min_ratio: float,
           min_lag: int, max_lag: int) -> Selection:
    """The cleanable range and whether to clean it. The last segment is the active one and is never cleaned.

    - dirty starts at the checkpoint, or at the log start when there is none or it lies outside the log;
    - cleaning stops at the active segment, and at the first dirty segment holding a record younger than
      min.compaction.lag.ms (KIP-58);
    - a pass runs when the cleanable share of the log is above min.cleanable.dirty.ratio, or when a dirty
      record has waited longer than max.compaction.lag.ms (KIP-354), or when a tombstone is due (KIP-534).
    """
    sealed, active = segments[:-1], segments[-1]
    start, end = segments[0].base, active.next
    dirty = checkpoint if checkpoint is not None and start <= checkpoint <= end else start
    stop = active.base
    for s in sealed:
        if s.next > dirty and min_lag > 0 and s.largest_ts is not None and now - s.largest_ts < min_lag:
            stop = s.base
            break
    stop = max(stop, dirty)
    clean = sum(s.size for s in segments if s.next <= dirty)
    cleanable = sum(s.size for s in sealed if s.next > dirty and s.base < stop) if stop > dirty else 0
    ratio = cleanable / (clean + cleanable) if clean + cleanable else 0.0
    waited = [now - s.first_ts for s in sealed if s.next > dirty and s.first_ts is not None]
    overdue = bool(waited) and max(waited) > max_lag
    sealed_end = active.base
    due = any(r["offset"] < sealed_end and r["value"] is None and r["key"] is not None
              and r["delete_horizon_ms"] is not None and now >= r["delete_horizon_ms"] for r in records)
    eligible = (cleanable > 0 and (overdue or ratio > min_ratio)) or due
    return Selection(dirty, stop, ratio, overdue, due, eligible)


def map_capacity(buffer_bytes: int, versioned: bool) -> int:
    """How many distinct keys one pass maps: the slots of the dedupe buffer, filled to the load factor."""
    slots = max(2, buffer_bytes // (HASH_AND_OFFSET_BYTES + (VERSION_BYTES if versioned else 0)))
    return max(1, min(slots - 1, int(slots * LOAD_FACTOR)))


def pass_end(records: list[dict], first_dirty: int, first_uncleanable: int, capacity: int) -> int:
    """Where a pass stops: before the first dirty record whose key would not fit the map any more."""
    keys: set[bytes] = set()
    for r in records:
        if first_dirty <= r["offset"] < first_uncleanable and r["key"] is not None:
            if r["key"] not in keys and len(keys) == capacity:
                return r["offset"]
            keys.add(r["key"])
    return first_uncleanable


def clean(records: list[dict], first_dirty: int, end: int, now: int, retention: int, strategy: str,
          header: str | None) -> list[dict]:
    """The log after one pass over [log start, end) whose dirty part starts at first_dirty."""
    winner: dict[bytes, tuple[int, int]] = {}
    for r in records:
        if r["offset"] < end and r["key"] is not None:
            k = rank(r, strategy, header)
            winner[r["key"]] = max(winner.get(r["key"], k), k)
    out = []
    for r in records:
        r = dict(r)
        if r["offset"] < end:
            if r["key"] is None:
                if r["offset"] >= first_dirty:
                    continue
            elif rank(r, strategy, header) != winner[r["key"]]:
                continue
            if r["value"] is None and r["key"] is not None:
                if r["delete_horizon_ms"] is None:
                    r["delete_horizon_ms"] = now + retention
                elif now >= r["delete_horizon_ms"]:
                    continue
        out.append(r)
    return out


def live(records: list[dict], end: int, strategy: str, header: str | None, tombstones: bool = False) -> list[dict]:
    """Each key's best-ranked record below ``end``, in offset order: the table of a compacted topic's state.
    A winner that is a tombstone deletes its key unless ``tombstones`` asks to see it."""
    winner: dict[bytes, dict] = {}
    for r in records:
        if r["offset"] < end and r["key"] is not None:
            best = winner.get(r["key"])
            if best is None or rank(r, strategy, header) > rank(best, strategy, header):
                winner[r["key"]] = r
    return sorted((r for r in winner.values() if tombstones or r["value"] is not None), key=lambda r: r["offset"])
