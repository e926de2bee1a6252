"""What an append did, as the counts each ingest task returns in one row: apart from the appender, so that
the ingest source's module, which Spark's planning process loads anew for every query, can name its schema
without loading the log (numba, fastavro)."""

from __future__ import annotations

from dataclasses import astuple, dataclass, fields
from typing import Any, Mapping

import pyarrow as pa


@dataclass
class AppendCounts:
    """What appending did to one partition log, or, summed, to all a micro-batch touched."""

    appended: int = 0
    skipped: int = 0  # replayed: already in the log
    rolled: int = 0
    rejected: int = 0  # set aside in rejected/
    odd_timestamps: int = 0  # stored, but timed by their append for rolls and lags

    def __add__(self, other: "AppendCounts") -> "AppendCounts":
        return AppendCounts(*(a + b for a, b in zip(astuple(self), astuple(other), strict=True)))


@dataclass(frozen=True)
class PartitionAppended:
    """One ingest task's row (STATS_SCHEMA): what appending did to one partition log, and where it ends."""

    topic: str
    partition: int
    counts: AppendCounts
    log_end_offset: int

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> "PartitionAppended":
        return cls(row["topic"], row["partition"], AppendCounts(*(row[c] for c in COUNTS)), row["log_end_offset"])


COUNTS = tuple(f.name for f in fields(AppendCounts))
STATS_DDL = "topic string, partition int, " + ", ".join(f"{c} long" for c in COUNTS) + ", log_end_offset long"
STATS_SCHEMA = pa.schema([("topic", pa.string()), ("partition", pa.int32()), *((c, pa.int64()) for c in COUNTS),
                          ("log_end_offset", pa.int64())])
