"""An Iceberg snapshot of the compacted state: each run upserts the keys whose winner changed since the last
one and deletes the keys whose winner is now a tombstone, in one Iceberg commit.

The source offsets a table is as of live in its properties (kcompact.source-offsets), committed with the
rows, so a run reads them back to know what changed since: a run killed before its commit leaves the table
and its offsets as they were (its data files are orphans, never referenced), and the next run does that
run's work as well. The table is partitioned by topic and partition, so a partition's deletes look at its
own files. A partition seen for the first time, or one where most keys changed, is rewritten whole.
"""

from __future__ import annotations

import json
import logging
import warnings

import pyarrow as pa
import pyarrow.compute as pc
from pyiceberg.catalog import Catalog, load_catalog
from pyiceberg.exceptions import NoSuchTableError
from pyiceberg.expressions import And, BooleanExpression, EqualTo, In
from pyiceberg.table import Table, Transaction

from streaming.iceberg.target import IcebergTarget
from streaming.moments import Moment, reached
from streaming.partition_id import PartitionId
from streaming.table.rows import table_schema
from streaming.table.snapshot import PartitionState, SnapshotReport, partition_states
from streaming.table.values import ValueColumn, ValueFormat

log = logging.getLogger(__name__)

CATALOG_NAME = "kcompact"  # a SQL catalog keeps its tables under its name: every run must use the same one
OFFSETS_PROPERTY = "kcompact.source-offsets"
REWRITE_SHARE = 0.5  # a partition where more of the keys changed is rewritten whole


def write_iceberg(state_uri: str, target: IcebergTarget, fmt: ValueFormat,
                  topics: frozenset[str] | None = None) -> SnapshotReport:
    catalog = load_catalog(CATALOG_NAME, **target.settings())
    table = _existing(catalog, target.table)
    since = _offsets(table)
    values = ValueColumn(fmt, table.schema().as_arrow().field("value").type if table is not None else None,
                         f"table {target.table}")
    report = SnapshotReport(target.table)
    tx: Transaction | None = None
    for state in partition_states(state_uri, topics, tombstones=True):
        report.ends[state.pid] = state.end
        if since.get(state.pid) == state.end:
            report.unchanged += 1
            continue
        rows = values.apply(state.batches, str(state.pid))
        if values.type is None:  # JSON with no value yet: the partition waits for one
            del report.ends[state.pid]
            continue
        if table is None:
            table = _create(catalog, target.table, table_schema(values.type))
        tx = tx or table.transaction()
        _upsert(tx, state, rows, since.get(state.pid), report)
    if table is None:
        return report
    tx = tx or table.transaction()
    tx.set_properties({OFFSETS_PROPERTY: _offsets_text({**since, **report.ends})})
    reached(Moment.SNAPSHOT_COMMIT, target.table)
    tx.commit_transaction()
    return report


def _existing(catalog: Catalog, name: str) -> Table | None:
    try:
        return catalog.load_table(name)
    except NoSuchTableError:
        return None


def _create(catalog: Catalog, name: str, schema: pa.Schema) -> Table:
    """A table for the rows' schema, partitioned by topic and partition; the namespace is made if missing."""
    namespace = name.rpartition(".")[0]
    catalog.create_namespace_if_not_exists(namespace)
    table = catalog.create_table(name, schema=schema)
    with table.update_spec() as spec:
        spec.add_identity("topic")
        spec.add_identity("partition")
    return table


def _upsert(tx: Transaction, state: PartitionState, rows: list[pa.RecordBatch], since: int | None,
            report: SnapshotReport) -> None:
    """Delete the rows of the keys whose winner is at or after ``since`` (every row of the partition when
    there is none, or when most keys changed), then append the live ones among them."""
    if not rows:
        return
    whole = pa.Table.from_batches(rows)
    changed = whole if since is None else whole.filter(pc.greater_equal(whole["offset"], since))
    if not changed.num_rows:
        return
    here: BooleanExpression = And(EqualTo("topic", state.pid.topic), EqualTo("partition", state.pid.partition))
    rewrite = since is None or changed.num_rows > REWRITE_SHARE * whole.num_rows
    tombstoned = changed["value"].null_count if since is not None else 0  # a first snapshot has nothing to delete
    if since is not None:  # rows and offsets commit together: a partition without offsets has no rows
        with warnings.catch_warnings():  # keys new to the table match nothing, as expected
            warnings.filterwarnings("ignore", "Delete operation did not match any records")
            tx.delete(here if rewrite else And(here, In("key", changed["key"].to_pylist())))
    written = whole if rewrite else changed
    added = written.filter(pc.is_valid(written["value"]))
    if added.num_rows:
        tx.append(added)
    report.rows += added.num_rows
    report.deleted += tombstoned
    log.debug("%s: %s, %d rows added, %d tombstoned keys", state.pid, "rewritten" if rewrite else "upserted",
              added.num_rows, tombstoned)


def _offsets(table: Table | None) -> dict[PartitionId, int]:
    if table is None:
        return {}
    doc = json.loads(table.properties.get(OFFSETS_PROPERTY, "{}"))
    return {PartitionId(t, int(p)): int(o) for t, parts in doc.items() for p, o in parts.items()}


def _offsets_text(ends: dict[PartitionId, int]) -> str:
    """As Spark's offsets JSON: {"topic": {"partition": offset}}."""
    doc: dict[str, dict[str, int]] = {}
    for pid, end in sorted(ends.items()):
        doc.setdefault(pid.topic, {})[str(pid.partition)] = end
    return json.dumps(doc, sort_keys=True)
