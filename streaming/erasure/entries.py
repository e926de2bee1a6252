"""Erasure entries: a tombstone's journal events folded into one record of its erasure, and the deadline
it is held to. KIP-354 bounds the time to erase by max.compaction.lag.ms; a compactor that cleans on
triggers adds one trigger interval to it."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Iterable, Mapping

from streaming.erasure.events import Emitted, Erased, Ingested, Removed, Superseded, events_of
from streaming.partition_id import PartitionId
from streaming.configuration.settings import LONG_MAX


@dataclass
class Erasure:
    topic: str
    partition: int
    offset: int                         # the tombstone's source offset
    timestamp_ms: int | None = None     # the tombstone's own timestamp: the erasure was asked for then
    key_sha256: str | None = None
    key: str | None = None              # base64, with erase.audit.keys=key
    ingested_ms: int | None = None
    erased_ms: int | None = None        # the pass after which no earlier record of the key was in the log
    delete_horizon_ms: int | None = None
    sink_offset: int | None = None
    sink_ms: int | None = None          # when the sink transaction holding the tombstone committed
    sink_recovered: bool = False        # sink_ms is when a crash's lost event was made good, not the commit
    removed_ms: int | None = None       # the tombstone itself left the log, at its delete horizon
    superseded_ms: int | None = None    # a later record of the key took the tombstone's place
    superseded_by: int | None = None
    superseded_by_tombstone: bool = False

    @property
    def pid(self) -> PartitionId:
        return PartitionId(self.topic, self.partition)

    @property
    def state(self) -> str:
        if self.superseded_ms is not None:
            return "replaced by a later tombstone" if self.superseded_by_tombstone else "key written again"
        if self.removed_ms is not None:
            return "done" if self.sink_ms is not None else "removed before reaching the sink"
        if self.sink_ms is not None:
            return "in the sink"
        if self.erased_ms is not None:
            return "erased from the log"
        return "waiting for a pass"

    def log_latency_ms(self) -> int | None:
        """From the tombstone's timestamp until no earlier record of its key was left in the log."""
        return None if self.erased_ms is None or self.timestamp_ms is None else self.erased_ms - self.timestamp_ms

    def sink_latency_ms(self) -> int | None:
        """From the tombstone's timestamp until it was committed to the sink."""
        return None if self.sink_ms is None or self.timestamp_ms is None else self.sink_ms - self.timestamp_ms

    def held_for_sink_ms(self, now_ms: int) -> int | None:
        """How long past its delete horizon the tombstone has stayed in the log because the sink has not
        committed it (no pass removes it before); None when it is not held."""
        if self.delete_horizon_ms is None or now_ms < self.delete_horizon_ms or self.sink_ms is not None \
                or self.removed_ms is not None or self.superseded_ms is not None:
            return None
        return now_ms - self.delete_horizon_ms

    def overdue(self, now_ms: int, bound_ms: int) -> str | None:
        """What is late, or None: earlier records still in the log, or the tombstone not yet in the sink,
        ``bound_ms`` after the tombstone's timestamp. A key written again has nothing left to erase."""
        if self.superseded_ms is not None or self.timestamp_ms is None or bound_ms >= LONG_MAX:
            return None
        if now_ms <= self.timestamp_ms + bound_ms:
            return None
        if self.erased_ms is None:
            return "earlier records still in the log"
        if self.sink_ms is None:
            return "removed before reaching the sink" if self.removed_ms is not None else "not in the sink yet"
        return None

    def to_doc(self) -> dict:
        return {**asdict(self), "state": self.state}


def deadline_ms(max_compaction_lag_ms: int, trigger_interval_ms: int) -> int:
    """How long after its timestamp a tombstone's erasure may take; LONG_MAX when the topic sets no bound."""
    return LONG_MAX if max_compaction_lag_ms >= LONG_MAX else max_compaction_lag_ms + trigger_interval_ms


def fold(pid: PartitionId, docs: Iterable[Mapping[str, Any]]) -> list[Erasure]:
    """One entry per tombstone, in offset order, from its journal's objects; later events of a kind win (a
    sink re-created and filled again gives a tombstone its new sink offset)."""
    entries: dict[int, Erasure] = {}
    for e in events_of(docs):
        entry = entries.get(e.offset)
        if entry is None:
            entry = entries[e.offset] = Erasure(pid.topic, pid.partition, e.offset)
        match e:
            case Ingested():
                entry.timestamp_ms, entry.ingested_ms = e.timestamp, e.at
                entry.key_sha256, entry.key = e.key_sha256, e.key
            case Erased():
                entry.erased_ms, entry.delete_horizon_ms = e.at, e.delete_horizon_ms
            case Superseded():
                entry.superseded_ms, entry.superseded_by = e.at, e.by
            case Removed():
                entry.removed_ms = e.at
            case Emitted():
                entry.sink_offset, entry.sink_ms, entry.sink_recovered = e.sink_offset, e.at, e.recovered
    for entry in entries.values():
        if entry.superseded_by is not None:
            entry.superseded_by_tombstone = entry.superseded_by in entries
    return [entries[o] for o in sorted(entries)]
