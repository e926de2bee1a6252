"""What a snapshot reads: each partition's live rows and the source offset they are as of, from the state
dir as the job left it or as it is while it runs (each log from one manifest, under a read hold)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator, Mapping

import pyarrow as pa

from streaming.partition_id import PartitionId
from streaming.configuration.output_names import OutputName
from streaming.table.state_reader import LogToRead, TableQuery, current_end, logs_to_read, opened_log
from streaming.table.values import ValueSpec


@dataclass
class PartitionState:
    """One partition's rows (TABLE_SCHEMA, values as stored) as of ``end``: the log's end when it was read."""

    pid: PartitionId
    end: int
    batches: list[pa.RecordBatch]
    unchanged: bool = False  # the log's end is the one the caller knew: nothing was read


def snapshot_logs(state_uri: str, topics: frozenset[str] | None) -> list[LogToRead]:
    """The logs a snapshot takes (live rows only); the state dir and the topics are checked here, before
    anything is written."""
    return logs_to_read(state_uri, TableQuery(topics=topics))


def outputs(state_uri: str, name: OutputName, spec: ValueSpec, topics: frozenset[str] | None,
            one_table: bool) -> dict[str, frozenset[str] | None]:
    """Each output's name and the topics it takes, of the topics the state dir holds (``topics`` narrows;
    None: all of them, for one output without a template)."""
    held = sorted({log.pid.topic for log in snapshot_logs(state_uri, topics)})
    grouped = name.of(held, spec.columns_from_values, one_table)
    return grouped if name.per_topic else {name.template: topics}


def partition_states(logs: list[LogToRead], known: Mapping[PartitionId, int]) -> Iterator[PartitionState]:
    """Partition by partition, so memory holds one partition's live rows at a time. A log whose end is the
    one ``known`` gives has not changed since, and is not read."""
    return (_state(item, known) for item in logs)


def _state(item: LogToRead, known: Mapping[PartitionId, int]) -> PartitionState:
    if known.get(item.pid) == current_end(item):
        return PartitionState(item.pid, known[item.pid], [], unchanged=True)
    with opened_log(item) as live:
        return PartitionState(item.pid, live.end, list(live.batches))


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

    def to_doc(self) -> dict:
        """`snapshot --json`: the figures, and where each partition's snapshot ends (its log offset)."""
        return {"target": self.target, "rows": self.rows, "deleted": self.deleted, "unchanged": self.unchanged,
                "ends": {str(pid): end for pid, end in sorted(self.ends.items())}}
