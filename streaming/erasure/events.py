"""What the erase audit journals, one event per tombstone and step, each committed with the log change
that made it true (streaming.log.journal): a replayed append or pass says a thing again only if it did it
again, and a crash between a change and its event cannot happen.

    ingested    the tombstone was appended to the log (its source offset, timestamp and key)
    erased      a pass kept the tombstone as its key's winner: every earlier record of the key is gone
    superseded  a pass removed the tombstone for a later record of its key (the key was written again)
    removed     a pass removed the tombstone at its delete horizon (KIP-534)
    emitted     the tombstone was committed to the sink, at this sink offset
"""

from __future__ import annotations

import base64
import hashlib
from enum import Enum

import numpy as np
import pyarrow as pa

from streaming.log.columns import offsets_of, validity
from streaming.log.journal import Event



class AuditKeys(str, Enum):
    """erase.audit.keys: how an entry names its key."""

    HASH = "hash"  # the key's SHA-256: the audit holds no personal data
    KEY = "key"
    OFF = "off"    # no erase audit is kept


INGESTED, ERASED, SUPERSEDED, REMOVED, EMITTED = "ingested", "erased", "superseded", "removed", "emitted"


def tombstone_mask(batch: pa.RecordBatch) -> np.ndarray:
    """Records with a key and no value: deletions (a keyless record without a value deletes nothing)."""
    return validity(batch.column("key")) & ~validity(batch.column("value"))


def key_fields(key: bytes, keys: AuditKeys) -> dict[str, str]:
    if keys is AuditKeys.KEY:
        return {"key": base64.b64encode(key).decode()}
    return {"key_sha256": hashlib.sha256(key).hexdigest()}


def ingested(batch: pa.RecordBatch, now_ms: int, keys: AuditKeys) -> list[Event]:
    """The tombstones among records just appended (LOG_BATCH_SCHEMA)."""
    if keys is AuditKeys.OFF:
        return []
    mask = tombstone_mask(batch)
    if not mask.any():
        return []
    rows = batch.filter(pa.array(mask))
    return [{"e": INGESTED, "offset": int(o), "timestamp": int(t), "at": now_ms, **key_fields(k, keys)}
            for o, t, k in zip(offsets_of(rows).tolist(), rows.column("timestamp").to_numpy().tolist(),
                               rows.column("key").to_pylist(), strict=True)]


def erased(offsets: np.ndarray, timestamps: np.ndarray, horizons: np.ndarray, pass_ms: int) -> list[Event]:
    """The tombstone's timestamp is repeated here so the stage can time the erasure without the journal."""
    return [{"e": ERASED, "offset": o, "timestamp": t, "at": pass_ms, "delete_horizon_ms": h}
            for o, t, h in zip(offsets.tolist(), timestamps.tolist(), horizons.tolist(), strict=True)]


def superseded(offsets: np.ndarray, winners: np.ndarray, pass_ms: int) -> list[Event]:
    return [{"e": SUPERSEDED, "offset": o, "at": pass_ms, "by": w}
            for o, w in zip(offsets.tolist(), winners.tolist(), strict=True)]


def removed(offsets: np.ndarray, pass_ms: int) -> list[Event]:
    return [{"e": REMOVED, "offset": o, "at": pass_ms} for o in offsets.tolist()]


def emitted(source_offset: int, sink_offset: int | None, at_ms: int, recovered: bool = False) -> Event:
    """A tombstone a sink transaction committed. ``recovered``: found in the sink after a crash lost its
    event; ``at_ms`` is then when it was found, and ``sink_offset`` None if the sink no longer holds it."""
    event: Event = {"e": EMITTED, "offset": source_offset, "at": at_ms, "sink_offset": sink_offset}
    return {**event, "recovered": True} if recovered else event
