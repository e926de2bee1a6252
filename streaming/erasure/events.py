"""What the erase audit journals, one event per tombstone and step, each committed with the log change
that made it true (streaming.log.journal): a replayed append or pass says a thing again only if it did it
again, and a crash between a change and its event cannot happen.

    Ingested    the tombstone was appended to the log (its source offset, timestamp and key)
    Erased      a pass kept the tombstone as its key's winner: every earlier record of the key is gone
    Superseded  a pass removed the tombstone for a later record of its key (the key was written again)
    Removed     a pass removed the tombstone at its delete horizon (KIP-534)
    Emitted     the tombstone was committed to the sink, at this sink offset
"""

from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass, field, fields
from enum import Enum
from typing import Any, ClassVar, Iterable, Iterator, Mapping

import numpy as np
import pyarrow as pa

from streaming.log.columns import offsets_of, validity


class AuditKeys(str, Enum):
    """erase.audit.keys: how an entry names its key."""

    HASH = "hash"  # the key's SHA-256: the audit holds no personal data
    KEY = "key"
    OFF = "off"    # no erase audit is kept


@dataclass(frozen=True)
class AuditEvent:
    """One fact of a tombstone's erasure, as the journal keeps it: a JSON object whose "e" names the kind.
    A field marked ``optional`` is left out of the object at its default, as the journal always wrote it."""

    KIND: ClassVar[str] = ""
    offset: int  # the tombstone's source offset
    at: int      # when it became true (ms)

    def to_doc(self) -> dict[str, Any]:
        return {"e": self.KIND, **{f.name: getattr(self, f.name) for f in fields(self)
                                   if not (f.metadata.get("optional") and getattr(self, f.name) == f.default)}}

    @staticmethod
    def from_doc(doc: Mapping[str, Any]) -> "AuditEvent":
        kind = _KINDS[doc["e"]]
        return kind(**{k: v for k, v in doc.items() if k != "e"})


def _optional(default: Any) -> Any:
    return field(default=default, metadata={"optional": True})


@dataclass(frozen=True)
class Ingested(AuditEvent):
    """The tombstone was appended to the log."""

    KIND: ClassVar[str] = "ingested"
    timestamp: int = 0
    key_sha256: str | None = _optional(None)
    key: str | None = _optional(None)  # base64, with erase.audit.keys=key


@dataclass(frozen=True)
class Erased(AuditEvent):
    """A pass kept the tombstone as its key's winner: every earlier record of the key is gone. Its timestamp
    is repeated here so the stage can time the erasure without the journal."""

    KIND: ClassVar[str] = "erased"
    timestamp: int = 0
    delete_horizon_ms: int = 0


@dataclass(frozen=True)
class Superseded(AuditEvent):
    """A pass removed the tombstone for a later record of its key, at offset ``by``."""

    KIND: ClassVar[str] = "superseded"
    by: int = 0


@dataclass(frozen=True)
class Removed(AuditEvent):
    """A pass removed the tombstone at its delete horizon (KIP-534)."""

    KIND: ClassVar[str] = "removed"


@dataclass(frozen=True)
class Emitted(AuditEvent):
    """A sink transaction committed the tombstone. ``recovered``: found in the sink after a crash lost its
    event; ``at`` is then when it was found, and ``sink_offset`` None if the sink no longer holds it."""

    KIND: ClassVar[str] = "emitted"
    sink_offset: int | None = None
    recovered: bool = _optional(False)


_KINDS: dict[str, type[AuditEvent]] = {k.KIND: k for k in (Ingested, Erased, Superseded, Removed, Emitted)}


def events_of(docs: Iterable[Mapping[str, Any]]) -> Iterator[AuditEvent]:
    """A journal's objects as the events they are."""
    return map(AuditEvent.from_doc, docs)


def tombstone_mask(batch: pa.RecordBatch) -> np.ndarray:
    """Records with a key and no value: deletions (a keyless record without a value deletes nothing)."""
    return validity(batch.column("key")) & ~validity(batch.column("value"))


def key_fields(key: bytes, keys: AuditKeys) -> dict[str, str]:
    if keys is AuditKeys.KEY:
        return {"key": base64.b64encode(key).decode()}
    return {"key_sha256": hashlib.sha256(key).hexdigest()}


def ingested(batch: pa.RecordBatch, now_ms: int, keys: AuditKeys) -> list[Ingested]:
    """The tombstones among records just appended (LOG_BATCH_SCHEMA)."""
    if keys is AuditKeys.OFF:
        return []
    mask = tombstone_mask(batch)
    if not mask.any():
        return []
    rows = batch.filter(pa.array(mask))
    return [Ingested(int(o), now_ms, int(t), **key_fields(k, keys))
            for o, t, k in zip(offsets_of(rows).tolist(), rows.column("timestamp").to_numpy().tolist(),
                               rows.column("key").to_pylist(), strict=True)]


def erased(offsets: np.ndarray, timestamps: np.ndarray, horizons: np.ndarray, pass_ms: int) -> list[Erased]:
    return [Erased(o, pass_ms, t, h) for o, t, h in zip(offsets.tolist(), timestamps.tolist(), horizons.tolist(),
                                                         strict=True)]


def superseded(offsets: np.ndarray, winners: np.ndarray, pass_ms: int) -> list[Superseded]:
    return [Superseded(o, pass_ms, w) for o, w in zip(offsets.tolist(), winners.tolist(), strict=True)]


def removed(offsets: np.ndarray, pass_ms: int) -> list[Removed]:
    return [Removed(o, pass_ms) for o in offsets.tolist()]
