"""An Iceberg snapshot of the compacted state: each run upserts the keys whose winner changed since the last
one and deletes the keys that have none any more (a tombstone won), in one Iceberg commit.

The source offsets a table is as of live in its properties (kcompact.source-offsets), committed with the
rows, so a run reads them back to know what changed since: a run killed before its commit leaves the table
and its offsets as they were (its data files are orphans, never referenced), and the next run does that
run's work as well; a partition whose log has not moved since is not read. The table is partitioned by
topic and partition, so a partition's deletes look at its own files. A partition seen for the first time,
or one where most keys changed, is rewritten whole.

A column added with a default (streaming.table.column_defaults) is filled into the rows the table already
holds by rewriting every partition whole in the same commit, as PostgreSQL's rows take it; the defaults are
kept in the table's properties (kcompact.connect-defaults), since an Iceberg column holds no such default for
rows written before it (format 2). Decimals wider than Iceberg's 38 digits are their exact text.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import warnings
from typing import Iterator

import pyarrow as pa
import pyarrow.compute as pc
from pyiceberg.catalog import Catalog, load_catalog
from pyiceberg.exceptions import (CommitFailedException, NoSuchNamespaceError, NoSuchTableError, NotInstalledError,
                                  RESTError, ValidationError, ValidationException)
from pyiceberg.expressions import And, BooleanExpression, EqualTo, In
from pyiceberg.table import Table, Transaction
from requests import RequestException
from sqlalchemy.exc import SQLAlchemyError

from streaming.errors import UserError
from streaming.iceberg.target import IcebergTarget
from streaming.runtime.moments import Moment, reached
from streaming.partition_id import PartitionId, offsets_from_json, offsets_to_json
from streaming.table.rows import Coordinates
from streaming.table.column_defaults import defaults_of, has_default, restored
from streaming.table.connect_types import MAX_PRECISION
from streaming.table.evolution import WAY_OUT, SchemaChangeError, widens
from streaming.table.snapshot import PartitionState, SnapshotReport, partition_states, snapshot_logs
from streaming.table.state_reader import LogToRead
from streaming.table.values import TableShape, ValueSpec

log = logging.getLogger(__name__)

# pyiceberg 0.12's delete decides which manifests hold the files to drop on its thread pool, through one
# evaluator that keeps the manifest it is reading in an attribute (_ManifestEvalVisitor.eval): under load a
# thread reads another's partition bounds, skips the manifest holding a file it must drop, and the commit
# fails with "Missing required files to delete". One worker, read when the pool is first made, keeps the
# evaluation serial; this package is pyiceberg's only user, so setting it on import comes before any table.
os.environ["PYICEBERG_MAX_WORKERS"] = "1"

CATALOG_NAME = "kcompact"  # a SQL catalog keeps its tables under its name: every run must use the same one
OFFSETS_PROPERTY = "kcompact.source-offsets"
DEFAULTS_PROPERTY = "kcompact.connect-defaults"
NEWEST_PROPERTY = "kcompact.newest-schema"  # --from-schema latest: the newest Connect schema and its record time
REWRITE_SHARE = 0.5  # a partition where more of the keys changed is rewritten whole
# what a catalog or its store raises for a refusal or an outage (pyiceberg's own, its SQL and HTTP clients')
CATALOG_ERRORS = (RESTError, CommitFailedException, NoSuchNamespaceError, NotInstalledError, ValidationError,
                  ValidationException, SQLAlchemyError, RequestException, OSError)


class IcebergCatalogError(UserError, RuntimeError):
    """The catalog or its store refused or could not be reached: the table is as its last commit left it."""


@contextlib.contextmanager
def _catalog_errors(target: IcebergTarget) -> Iterator[None]:
    try:
        yield
    except CATALOG_ERRORS as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""  # SQLAlchemy adds a line of links
        where = target.catalog or "the default catalog (./kcompact-iceberg)"
        raise IcebergCatalogError(f"Iceberg table {target.table} in {where}: {type(exc).__name__}: {first}") from exc


def write_iceberg(state_uri: str, target: IcebergTarget, spec: ValueSpec,
                  topics: frozenset[str] | None = None) -> SnapshotReport:
    logs = snapshot_logs(state_uri, topics)
    preset = None
    with _catalog_errors(target):
        while True:  # once more for each column with a default found after rows without it were written
            try:
                return _write(logs, target, spec, preset)
            except _DefaultAdded as added:
                preset = added.schema


class _DefaultAdded(Exception):
    """A column with a default appeared after rows without it were written: the run starts again with the
    columns known so far, every partition rewritten whole, so those rows take the default."""

    def __init__(self, schema: pa.Schema) -> None:
        super().__init__()
        self.schema = schema


def _write(logs: list[LogToRead], target: IcebergTarget, spec: ValueSpec, preset: pa.Schema | None) -> SnapshotReport:
    catalog = load_catalog(CATALOG_NAME, **target.settings())
    table = _existing(catalog, target.table)
    since = _offsets(table)
    whole = preset is not None
    shape = TableShape(spec, preset or _kept(table), f"table {target.table}", MAX_PRECISION)  # Iceberg's widest decimal
    if shape.latest:
        newest = None if table is None else table.properties.get(NEWEST_PROPERTY)
        shape.seed(None if whole or newest is None else tuple(json.loads(newest)))
        for state in partition_states(logs, since if newest and not whole else {}):
            shape.learn(state.batches, str(state.pid))
    report = SnapshotReport(target.table)
    tx: Transaction | None = None
    for state in partition_states(logs, {} if whole else since):
        report.ends[state.pid] = state.end
        if state.unchanged:
            report.unchanged += 1
            continue
        before = shape.schema
        rows = shape.apply(state.batches, str(state.pid))
        if shape.schema is None:  # JSON with no value yet: the partition waits for one
            del report.ends[state.pid]
            continue
        if (tx is not None or (since and not whole)) and _defaults_added(before or _kept(table), shape.schema):
            raise _DefaultAdded(shape.schema)
        if table is None:
            table = _create(catalog, target.table, shape.schema, spec.coordinates)
        tx = tx or table.transaction()
        order = _evolve(tx, shape.schema, shape.latest, target.table)
        _upsert(tx, table, state, [r.select(order) for r in rows], pa.schema([shape.schema.field(n) for n in order]),
                spec.coordinates, since.get(state.pid), whole, report)
    offsets = {**since, **report.ends}
    if table is None or (tx is None and offsets == since):  # nothing new: no commit, no new metadata file
        return report
    tx = tx or table.transaction()
    tx.set_properties({OFFSETS_PROPERTY: offsets_to_json(offsets),
                       **({DEFAULTS_PROPERTY: json.dumps(defaults_of(shape.schema), sort_keys=True)}
                          if shape.schema is not None else {}),
                       **({NEWEST_PROPERTY: json.dumps(shape.newest_mark)} if shape.newest_mark else {})})
    reached(Moment.SNAPSHOT_COMMIT, target.table)
    tx.commit_transaction()
    return report


def _kept(table: Table | None) -> pa.Schema | None:
    """The table's columns as the rows' Arrow schema, with the defaults its properties keep."""
    if table is None:
        return None
    return restored(_plain(table.schema().as_arrow()), json.loads(table.properties.get(DEFAULTS_PROPERTY, "{}")))


def _defaults_added(before: pa.Schema | None, after: pa.Schema) -> bool:
    known = set(before.names) if before is not None else set()
    return any(has_default(f) and f.name not in known for f in after)


def _existing(catalog: Catalog, name: str) -> Table | None:
    try:
        return catalog.load_table(name)
    except NoSuchTableError:
        return None


def _create(catalog: Catalog, name: str, schema: pa.Schema, at: Coordinates) -> Table:
    """A table for the rows' schema, partitioned by topic and partition; the namespace is made if missing."""
    namespace = name.rpartition(".")[0]
    catalog.create_namespace_if_not_exists(namespace)
    table = catalog.create_table(name, schema=schema)
    with table.update_spec() as spec:
        spec.add_identity(at.topic)
        spec.add_identity(at.partition)
    return table


def _evolve(tx: Transaction, schema: pa.Schema, latest: bool, name: str) -> list[str]:
    """Columns the rows have and the table lacks are added by Iceberg's schema evolution, in the same
    commit as the rows: the table's older rows read them as null (or their default: see write_iceberg).
    With --from-schema latest, columns the newest schema dropped are dropped; a column whose type changed
    is refused, since an Iceberg column keeps its type. The table's column order is returned: the rows are
    appended in it."""
    held = _plain(tx.table_metadata.schema().as_arrow())
    if latest:
        for f in schema:
            if f.name in held.names and held.field(f.name).type != f.type and not widens(held.field(f.name).type, f.type):
                raise SchemaChangeError(f"column {f.name} of table {name} is {held.field(f.name).type}, and the "
                                        f"newest schema has {f.type}: an Iceberg column keeps its type; {WAY_OUT}")
    dropped = [n for n in held.names if latest and n not in schema.names]
    if not held.equals(schema) or dropped:
        with tx.update_schema() as update:
            update.union_by_name(schema)
            for n in dropped:
                update.delete_column(n)
    return _plain(tx.table_metadata.schema().as_arrow()).names


def _upsert(tx: Transaction, table: Table, state: PartitionState, rows: list[pa.RecordBatch], schema: pa.Schema,
            at: Coordinates, since: int | None, whole: bool, report: SnapshotReport) -> None:
    """Make the partition's rows the log's live winners: the table's (key, offset) pairs are compared with the
    log's, so a key whose winner changed is upserted and a key with no live winner is deleted, even when its
    tombstone has already left the log (delete.retention.ms). Most keys changed, or ``whole``: the partition
    is rewritten."""
    live = pa.Table.from_batches(rows, schema=schema)
    here: BooleanExpression = And(EqualTo(at.topic, state.pid.topic), EqualTo(at.partition, state.pid.partition))
    if since is None:  # rows and offsets commit together: a partition without offsets has no rows yet
        held = pa.table({"key": pa.array([], pa.binary()), "held": pa.array([], pa.int64())})
    else:
        scanned = table.scan(row_filter=here, selected_fields=(at.key, at.offset)).to_arrow()
        held = scanned.select([at.key, at.offset]).rename_columns(["key", "held"])
    pairs = live.select([at.key, at.offset]).rename_columns(["key", "offset"]).join(held, "key", join_type="left outer")
    moved = pairs.filter(pc.or_kleene(pc.is_null(pairs["held"]), pc.not_equal(pairs["held"], pairs["offset"])))
    gone = held.filter(pc.invert(pc.is_in(held["key"], value_set=live[at.key])))["key"]
    replaced = moved.filter(pc.is_valid(moved["held"]))["key"]
    if not moved.num_rows and not len(gone) and not whole:
        return
    rewrite = whole or moved.num_rows + len(gone) > REWRITE_SHARE * max(held.num_rows, 1)
    added = live if rewrite else live.filter(pc.is_in(live[at.key], value_set=moved["key"]))
    if held.num_rows:
        with warnings.catch_warnings():  # pyiceberg warns of a delete that matches nothing
            warnings.filterwarnings("ignore", "Delete operation did not match any records")
            doomed = pa.concat_arrays([replaced.combine_chunks(), gone.combine_chunks()])
            tx.delete(here if rewrite else And(here, In(at.key, doomed.to_pylist())))
    if added.num_rows:
        tx.append(added)
    report.rows += added.num_rows
    report.deleted += len(gone)
    log.debug("%s: %s, %d rows added, %d keys deleted", state.pid, "rewritten" if rewrite else "upserted",
              added.num_rows, len(gone))


def _plain(schema: pa.Schema) -> pa.Schema:
    """An Iceberg schema as the rows' Arrow schema: pyiceberg reads strings and binaries as their large
    types, and marks each field with its Iceberg id."""
    return pa.schema([pa.field(f.name, _plain_type(f.type)) for f in schema])


def _plain_type(kind: pa.DataType) -> pa.DataType:
    if pa.types.is_large_string(kind):
        return pa.string()
    if pa.types.is_large_binary(kind):
        return pa.binary()
    if pa.types.is_struct(kind):
        return pa.struct([pa.field(f.name, _plain_type(f.type)) for f in kind])
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        return pa.list_(pa.field(kind.value_field.name, _plain_type(kind.value_type)))
    if pa.types.is_map(kind):
        return pa.map_(_plain_type(kind.key_type), _plain_type(kind.item_type))
    return kind


def _offsets(table: Table | None) -> dict[PartitionId, int]:
    return offsets_from_json(table.properties.get(OFFSETS_PROPERTY, "{}")) if table is not None else {}
