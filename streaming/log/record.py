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
