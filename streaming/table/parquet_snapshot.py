"""A Parquet snapshot: one file per partition (TOPIC-PARTITION.parquet), each replaced whole by a rename, so
a reader of the directory (DuckDB's read_parquet, Spark, pandas) sees a partition's previous file or its
new one, never a part of one. The source offset a file is as of is in its metadata (kcompact.end_offset):
a partition whose log has not moved since is neither read nor written again."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from streaming.errors import UsageError
from streaming.partition_id import PartitionId
from streaming.table.rows import table_schema
from streaming.table.snapshot import SnapshotReport, partition_states, snapshot_logs
from streaming.table.values import ValueColumn, ValueFormat

SUFFIX = ".parquet"
END_OFFSET = b"kcompact.end_offset"


def parquet_file(output: Path, pid: PartitionId) -> Path:
    return output / f"{pid}{SUFFIX}"


def write_parquet(state_uri: str, output: str, fmt: ValueFormat, topics: frozenset[str] | None = None) -> SnapshotReport:
    out = Path(output)
    if out.exists() and not out.is_dir():
        raise UsageError(f"--output {output} is a file; give a directory for the snapshot's files")
    logs = snapshot_logs(state_uri, topics)
    out.mkdir(parents=True, exist_ok=True)
    ends, kept = _written(out)
    values = ValueColumn(fmt, kept, str(out))
    report = SnapshotReport(str(out))
    for state in partition_states(logs, ends):
        report.ends[state.pid] = state.end
        if state.unchanged:  # its file is as of the log's end already
            report.unchanged += 1
            continue
        batches = values.apply(state.batches, str(state.pid))
        if values.type is None:  # JSON with no value anywhere yet: nothing to write
            continue
        schema = batches[0].schema if batches else table_schema(values.type)
        _replace(parquet_file(out, state.pid), schema.with_metadata({END_OFFSET: str(state.end).encode()}), batches)
        report.rows += sum(b.num_rows for b in batches)
    return report


def _written(out: Path) -> tuple[dict[PartitionId, int], pa.DataType | None]:
    """What an earlier snapshot wrote: the source offset each file is as of, and the value column's type
    (for JSON, the schema it inferred)."""
    ends, kept = {}, None
    for path in sorted(out.glob(f"*{SUFFIX}")):
        schema = pq.read_schema(path)
        if kept is None:
            kept = schema.field("value").type
        pid = PartitionId.from_name(path.name[: -len(SUFFIX)])
        if pid is not None and END_OFFSET in (schema.metadata or {}):
            ends[pid] = int(schema.metadata[END_OFFSET])
    return ends, kept


def _replace(path: Path, schema: pa.Schema, batches: list[pa.RecordBatch]) -> None:
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    try:
        with pq.ParquetWriter(tmp, schema) as writer:
            for b in batches:
                writer.write_batch(b.replace_schema_metadata(schema.metadata))
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
