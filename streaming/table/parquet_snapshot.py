"""A Parquet snapshot: one file per partition (TOPIC-PARTITION.parquet), each replaced whole by a rename, so
a reader of the directory (DuckDB's read_parquet, Spark, pandas) sees a partition's previous file or its
new one, never a part of one. The source offset a file is as of is in its metadata (kcompact.end_offset):
a partition whose log has not moved since is neither read nor written again. When a snapshot's rows bring a
new column (a field added at the source), every file without it is rewritten with it: null in its rows, or
the column's default where the Connect schema that added it gives one. With --from-schema latest, every
file is rewritten in the newest schema when it changes."""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from streaming.errors import UsageError
from streaming.partition_id import PartitionId
from streaming.table.evolution import conformed, merged
from streaming.table.snapshot import SnapshotReport, partition_states, snapshot_logs
from streaming.table.values import TableShape, ValueSpec

SUFFIX = ".parquet"
END_OFFSET = b"kcompact.end_offset"
NEWEST_SCHEMA = b"kcompact.newest_schema"  # --from-schema latest: the newest Connect schema and its record time


def parquet_file(output: Path, pid: PartitionId) -> Path:
    return output / f"{pid}{SUFFIX}"


def write_parquet(state_uri: str, output: str, spec: ValueSpec, topics: frozenset[str] | None = None) -> SnapshotReport:
    out = Path(output)
    if out.exists() and not out.is_dir():
        raise UsageError(f"--output {output} is a file; give a directory for the snapshot's files")
    logs = snapshot_logs(state_uri, topics)
    out.mkdir(parents=True, exist_ok=True)
    ends, kept, newest = _written(out)
    shape = TableShape(spec, kept, str(out))
    if shape.latest:
        shape.seed(newest)
        for state in partition_states(logs, ends if newest else {}):
            shape.learn(state.batches, str(state.pid))
    report = SnapshotReport(str(out))
    for state in partition_states(logs, ends):
        report.ends[state.pid] = state.end
        if state.unchanged:  # its file is as of the log's end already
            report.unchanged += 1
            continue
        batches = shape.apply(state.batches, str(state.pid))
        if shape.schema is None:  # JSON with no value anywhere yet: nothing to write
            continue
        _replace(parquet_file(out, state.pid), _with_end(shape.schema, state.end, shape.newest_mark), batches)
        report.rows += sum(b.num_rows for b in batches)
    if shape.schema is not None:
        _evolve(out, shape.schema)
    return report


def _with_end(schema: pa.Schema, end: int, newest: tuple[int, str] | None) -> pa.Schema:
    return schema.with_metadata({END_OFFSET: str(end).encode(),
                                 **({NEWEST_SCHEMA: json.dumps(newest).encode()} if newest else {})})


def _written(out: Path) -> tuple[dict[PartitionId, int], pa.Schema | None, tuple[int, str] | None]:
    """What an earlier snapshot wrote: the source offset each file is as of, the rows' schema (all the
    files', merged: a snapshot stopped while it evolved them leaves some narrower), and the newest Connect
    schema one learned (--from-schema latest)."""
    ends, kept, newest = {}, None, None
    for path in sorted(out.glob(f"*{SUFFIX}")):
        schema = pq.read_schema(path)
        kept = schema.remove_metadata() if kept is None else merged(kept, schema.remove_metadata(), str(out))
        metadata = schema.metadata or {}
        pid = PartitionId.from_name(path.name[: -len(SUFFIX)])
        if pid is not None and END_OFFSET in metadata:
            ends[pid] = int(metadata[END_OFFSET])
        mark = tuple(json.loads(metadata[NEWEST_SCHEMA])) if NEWEST_SCHEMA in metadata else None
        newest = mark if newest is None or (mark is not None and mark[0] > newest[0]) else newest
    return ends, kept, newest


def _evolve(out: Path, schema: pa.Schema) -> None:
    """Every file whose schema is not ``schema`` (written before a column was added) rewritten in it."""
    for path in sorted(out.glob(f"*{SUFFIX}")):
        had = pq.read_schema(path)
        if had.remove_metadata().equals(schema.remove_metadata()):
            continue
        rows = pq.read_table(path)
        _replace(path, schema.with_metadata(had.metadata or {}),
                 [conformed(b, schema.remove_metadata()) for b in rows.to_batches()])


def _replace(path: Path, schema: pa.Schema, batches: list[pa.RecordBatch]) -> None:
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    try:
        with pq.ParquetWriter(tmp, schema) as writer:
            for b in batches:
                writer.write_batch(b.replace_schema_metadata(schema.metadata))
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
