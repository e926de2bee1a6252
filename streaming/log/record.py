"""The record as the log stores it: a plain dict in the shape of schemas/log_record.avsc.

Dicts, not objects, because they are what fastavro reads and writes natively: the append and clean hot
paths never convert a record.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any, TypedDict

import fastavro

SCHEMA_PATH = Path(__file__).resolve().parents[2] / "schemas" / "log_record.avsc"

CREATE_TIME = 0
LOG_APPEND_TIME = 1

# Roughly what Avro spends per record and per header beyond the payload bytes (varints, union tags,
# array framing). Sizes drive segment.bytes rolls and dirty ratios, so they must be cheap, not exact.
RECORD_OVERHEAD = 24
HEADER_OVERHEAD = 4


class Header(TypedDict):
    key: str
    value: bytes | None


class LogRecord(TypedDict, total=False):
    offset: int
    timestamp: int
    timestamp_type: int
    key: bytes | None
    value: bytes | None
    headers: list[Header]
    delete_horizon_ms: int | None


@lru_cache(maxsize=1)
def parsed_schema() -> dict[str, Any]:
    return fastavro.parse_schema(json.loads(SCHEMA_PATH.read_text()))


def record_size(r: LogRecord) -> int:
    """The bytes a record counts for in segment sizes (payload plus a fixed framing estimate)."""
    key = r["key"]
    value = r["value"]
    n = RECORD_OVERHEAD + (len(key) if key is not None else 0) + (len(value) if value is not None else 0)
    for h in r["headers"]:
        hv = h["value"]
        n += HEADER_OVERHEAD + len(h["key"]) + (len(hv) if hv is not None else 0)
    return n


def make_record(offset: int, key: bytes | None, value: bytes | None, timestamp: int,
                headers: list[tuple[str, bytes | None]] | None = None,
                timestamp_type: int = CREATE_TIME) -> LogRecord:
    """Build a record from Kafka-shaped parts (headers as (key, value) pairs, as clients give them)."""
    return {"offset": offset, "timestamp": timestamp, "timestamp_type": timestamp_type, "key": key,
            "value": value, "headers": [{"key": k, "value": v} for k, v in (headers or [])],
            "delete_horizon_ms": None}


def lag_timestamp(timestamp: int, append_ms: int, after_max_ms: int) -> int:
    """The time a record counts as written, for the roll and lag clocks (segment.ms, min/max lag).

    A record keeps its own timestamp (it is emitted unchanged), but a negative one (Kafka's NO_TIMESTAMP
    is -1) says nothing, and one more than message.timestamp.after.max.ms ahead of the append would hold
    its segment back from rolling and cleaning until that future time, and with it every key after it.
    Both count as written when they were appended.
    """
    return timestamp if 0 <= timestamp <= append_ms + after_max_ms else append_ms
