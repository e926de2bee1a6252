"""The record as the log stores it: a plain dict in the shape of streaming/log/log_record.avsc.

Dicts are the record at the edges (tests, dump, emission, the dict form of PartitionLog.append). The
append and clean paths work on columns instead (see columns), and never build one.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any, TypedDict

import fastavro
from fastavro.validation import ValidationError, validate

SCHEMA_PATH = Path(__file__).resolve().parent / "log_record.avsc"  # package data; schemas/ links to it

CREATE_TIME = 0
LOG_APPEND_TIME = 1

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


def make_record(offset: int, key: bytes | None, value: bytes | None, timestamp: int,
                headers: list[tuple[str, bytes | None]] | None = None,
                timestamp_type: int = CREATE_TIME) -> LogRecord:
    """Build a record from Kafka-shaped parts (headers as (key, value) pairs, as clients give them)."""
    return {"offset": offset, "timestamp": timestamp, "timestamp_type": timestamp_type, "key": key,
            "value": value, "headers": [{"key": k, "value": v} for k, v in (headers or [])],
            "delete_horizon_ms": None}


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
