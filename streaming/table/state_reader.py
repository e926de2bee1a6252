"""Which logs of a state dir a table read takes, and the rows of one of them.

Planning (logs_to_read) runs where the query is planned and checks what it can without reading records:
the topics and partitions asked for, and an as-of offset against each log's exact range. A log's rows
(read_log) are read where they are needed, under a read hold and from one manifest, so a running job
neither changes them under the reader nor deletes the objects they come from (read_hold).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Iterator, Mapping

import pyarrow as pa

from streaming.cleaner.config import CompactionConfig
from streaming.cleaner.live_state import AsOf, Live, live_records, log_end, resolve_end
from streaming.errors import UsageError
from streaming.job.spec import load_saved
from streaming.log.manifest import load_newest
from streaming.log.read_hold import holding
from streaming.partition_id import PartitionId, offsets_from_json
from streaming.state.layout import list_log_dirs
from streaming.state.stores import check_access, open_state_dir, task_state_dir
from streaming.table.rows import table_rows

LATEST = -1


@dataclass(frozen=True)
class TableQuery:
    """What a read asks for; by default every topic, the state as it is now."""

    topics: frozenset[str] | None = None
    as_of_offsets: Mapping[PartitionId, int] = field(default_factory=dict)  # a partition not named: now
    as_of_timestamp_ms: int | None = None
    tombstones: bool = False

    def as_of(self, pid: PartitionId) -> AsOf | None:
        offset = self.as_of_offsets.get(pid, LATEST)
        if offset != LATEST:
            return AsOf(offset=offset)
        return AsOf(timestamp_ms=self.as_of_timestamp_ms) if self.as_of_timestamp_ms is not None else None


def parse_as_of_offsets(text: str, option: str = "asOfOffsets") -> dict[PartitionId, int]:
    """JSON like {"orders":{"0":120,"1":-1}} (-1: as it is now), refused in one line naming ``option``."""
    try:
        given = offsets_from_json(text)
    except (ValueError, TypeError) as exc:
        raise UsageError(f"{option} must be JSON like {{\"orders\":{{\"0\":120,\"1\":-1}}}} (-1: as now): {exc}") from None
    odd = sorted(f"{pid}: {o}" for pid, o in given.items() if o < LATEST)
    if odd:
        raise UsageError(f"{option}: offsets are 0 or more, or -1 for as now ({', '.join(odd)})")
    return given


@dataclass(frozen=True)
class LogToRead:
    """One partition log a read takes: picklable, so a Spark task can read it on an executor."""

    state_uri: str
    pid: PartitionId
    directory: str
    compaction: CompactionConfig
    as_of: AsOf | None
    tombstones: bool


def logs_to_read(state_uri: str, query: TableQuery) -> list[LogToRead]:
    """The logs the query takes, in topic and partition order. A topic, partition or as-of point the state
    dir cannot answer is a UsageError or AsOfError here, before any record is read."""
    if query.as_of_offsets and query.as_of_timestamp_ms is not None:
        raise UsageError("give asOfOffsets or asOfTimestamp, not both")
    state = open_state_dir(state_uri)
    check_access(state, write=False)
    saved = load_saved(state)
    for topic in sorted((query.topics or set()) | {pid.topic for pid in query.as_of_offsets}):
        saved.plan_of(topic, state_uri)
    logs = {d.pid: d for d in list_log_dirs(state) if d.pid.topic in saved.topics}
    unknown = sorted(str(pid) for pid in query.as_of_offsets if pid not in logs)
    if unknown:
        raise UsageError(f"asOfOffsets names partitions the state dir has no log of: {', '.join(unknown)}")
    chosen = []
    for pid in sorted(logs):
        if query.topics is not None and pid.topic not in query.topics:
            continue
        item = LogToRead(state_uri, pid, logs[pid].directory, saved.topics[pid.topic].compaction, query.as_of(pid),
                         query.tombstones)
        if item.as_of is not None and item.as_of.offset is not None:  # a time needs the records: read_log checks it
            resolve_end(load_newest(state.storage, item.directory).manifest, None, item.as_of, str(pid))
        chosen.append(item)
    return chosen


def current_end(item: LogToRead) -> int:
    """The log's end as its newest manifest says, without reading a record."""
    state = task_state_dir(item.state_uri)
    return log_end(load_newest(state.storage, item.directory).manifest)


@contextlib.contextmanager
def opened_log(item: LogToRead) -> Iterator[Live]:
    """The log's live rows (TABLE_SCHEMA, in offset order) from its newest manifest, held while the body reads."""
    state = task_state_dir(item.state_uri)
    with holding(state.storage, item.directory):
        manifest = load_newest(state.storage, item.directory).manifest
        live = live_records(state.storage, item.directory, manifest, item.compaction, item.as_of, item.tombstones,
                            str(item.pid))
        yield Live(live.end, (table_rows(b, item.pid.topic, item.pid.partition) for b in live.batches))


def read_log(item: LogToRead) -> Iterator[pa.RecordBatch]:
    with opened_log(item) as live:
        yield from live.batches
