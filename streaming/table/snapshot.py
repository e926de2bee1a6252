"""What a snapshot reads: each partition's live rows and the source offset they are as of, from the state
dir as the job left it or as it is while it runs (each log from one manifest, under a read hold)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator, Mapping

import pyarrow as pa

from streaming.partition_id import PartitionId
from streaming.table.state_reader import TableQuery, current_end, logs_to_read, opened_log


@dataclass
class PartitionState:
    """One partition's rows (TABLE_SCHEMA, values as stored) as of ``end``: the log's end when it was read."""

    pid: PartitionId
    end: int
    batches: list[pa.RecordBatch]
    unchanged: bool = False  # the log's end is the one the caller knew: nothing was read


def partition_states(state_uri: str, topics: frozenset[str] | None, tombstones: bool,
                     known: Mapping[PartitionId, int] | None = None) -> Iterator[PartitionState]:
    """Partition by partition, so memory holds one partition's live rows at a time. A log whose end is the
    one ``known`` gives has not changed since, and is not read."""
    for item in logs_to_read(state_uri, TableQuery(topics=topics, tombstones=tombstones)):
        if known and known.get(item.pid) == current_end(item):
            yield PartitionState(item.pid, known[item.pid], [], unchanged=True)
            continue
        with opened_log(item) as live:
            yield PartitionState(item.pid, live.end, list(live.batches))


@dataclass
class SnapshotReport:
    """What a snapshot wrote, for the command's one line and the job's log."""

    target: str
    ends: dict[PartitionId, int] = field(default_factory=dict)
    rows: int = 0       # live rows written
    deleted: int = 0    # keys removed (Iceberg: tombstoned since the last snapshot)
    unchanged: int = 0  # partitions with nothing new since the last snapshot

    def describe(self) -> str:
        changed = len(self.ends) - self.unchanged
        parts = [f"{self.rows} rows written", *([f"{self.deleted} keys deleted"] if self.deleted else []),
                 f"{changed} of {len(self.ends)} partitions changed"]
        return f"snapshot {self.target}: {', '.join(parts)}"
