"""A database's change stream back as its table: Debezium's PostgreSQL connector on Kafka Connect writes a
real table's inserts, updates, deletes and an added column to topics, kcompact compacts them, and the
snapshot equals `SELECT * FROM customers`, every column typed as PostgreSQL has it. For the envelope with
Connect schemas, and for the flattened form (ExtractNewRecordState, whose deletes are JSON nulls); in
Parquet, in Iceberg, in the Spark source, and kept in step by a continuous run with --snapshot-every."""

from __future__ import annotations

import datetime as dt
import random
import uuid
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from confluent_kafka import KafkaException
from pyiceberg.catalog import load_catalog

from streaming.cli.main import main
from streaming.iceberg.snapshot import CATALOG_NAME
from streaming.iceberg.target import IcebergTarget
from streaming.kafka.admin import Cluster
from streaming.partition_id import PartitionId
from tests.cdc.connect import FLATTEN, converters
from tests.e2e.helpers import run_once, wait_for
from tests.e2e.running_job import RunningJob

pytestmark = pytest.mark.integration
PARTITIONS = 3
COLUMNS = ("id int PRIMARY KEY, name text NOT NULL, email text, balance numeric(12,2), created date, "
           "updated_at timestamp, seen timestamptz, visits smallint, active boolean, score double precision")
TYPES = {"id": pa.int32(), "name": pa.string(), "email": pa.string(), "balance": pa.decimal128(12, 2),
         "created": pa.date32(), "updated_at": pa.timestamp("us"), "seen": pa.timestamp("us", tz="UTC"),
         "visits": pa.int32(), "active": pa.bool_(), "score": pa.float64(), "tier": pa.string()}


@dataclass(frozen=True)
class Form:
    name: str
    connector: dict[str, str]
    extra: tuple[str, ...]  # the snapshot's options for this form
    events_per_delete: int  # records a delete writes: the envelope's delete and its tombstone, or one null


ENVELOPE = Form("envelope", converters(True), (), 2)
FLATTENED = Form("flattened", {**converters(True), **FLATTEN}, ("--json-null-deletes",), 1)


class Customers:
    """The table and what was done to it, so a test knows how many change events to wait for."""

    def __init__(self, conn, name: str, seed: int) -> None:
        self.conn, self.name, self.rng = conn, name, random.Random(seed)
        self.ids: list[int] = []
        self.next_id, self.events, self.deletes, self.tier = 1, 0, 0, False
        conn.execute(f"CREATE TABLE {name} ({COLUMNS})")

    def _row(self, i: int) -> tuple:
        r = self.rng
        return (i, f"name-{i}-{r.randrange(10**6)}", None if r.random() < 0.2 else f"c{i}@example.com",
                Decimal(r.randrange(-10**8, 10**8)) / 100, dt.date(2020, 1, 1) + dt.timedelta(days=r.randrange(3000)),
                dt.datetime(2026, 1, 1) + dt.timedelta(microseconds=r.randrange(10**13)),
                dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc) + dt.timedelta(microseconds=r.randrange(10**13)),
                r.randrange(-30000, 30000), r.random() < 0.5, r.random() * 1000)

    def change(self, inserts: int, updates: int, deletes: int) -> None:
        with self.conn.transaction():
            for _ in range(inserts):
                row = self._row(self.next_id) + ((self.rng.choice(["gold", "silver", None]),) if self.tier else ())
                self.conn.execute(f"INSERT INTO {self.name} VALUES ({', '.join(['%s'] * len(row))})", row)
                self.ids.append(self.next_id)
                self.next_id += 1
            for _ in range(updates):
                i = self.rng.choice(self.ids)
                row = self._row(i)
                sets = "name=%s, email=%s, balance=%s, created=%s, updated_at=%s, seen=%s, visits=%s, active=%s, score=%s"
                if self.tier:
                    sets += ", tier=%s"
                    row += (self.rng.choice(["gold", "bronze"]),)
                self.conn.execute(f"UPDATE {self.name} SET {sets} WHERE id=%s", (*row[1:], i))
            for _ in range(deletes):
                i = self.ids.pop(self.rng.randrange(len(self.ids)))
                self.conn.execute(f"DELETE FROM {self.name} WHERE id=%s", (i,))
        self.events += inserts + updates
        self.deletes += deletes

    def add_tier(self) -> None:
        self.conn.execute(f"ALTER TABLE {self.name} ADD COLUMN tier text")
        self.tier = True

    def rows(self) -> list[dict]:
        cur = self.conn.execute(f"SELECT * FROM {self.name} ORDER BY id")
        names = [d.name for d in cur.description]
        return [dict(zip(names, r, strict=True)) for r in cur.fetchall()]


def _table_rows(table: pa.Table, want: list[dict]) -> list[dict]:
    """The snapshot's rows in the database's columns, each checked for its type first."""
    columns = [c for c in table.column_names if not c.startswith("__")]
    assert columns == list(want[0]) if want else True
    for c in columns:
        assert table.schema.field(c).type == TYPES[c], c
    return sorted(table.select(columns).to_pylist(), key=lambda r: r["id"])


def _topic_holds(bootstrap: str, topic: str, records: int) -> None:
    cluster = Cluster("source", bootstrap)
    pids = [PartitionId(topic, p) for p in range(PARTITIONS)]

    def holds() -> bool:
        try:
            return sum(cluster.end_offsets(pids).values()) >= records
        except KafkaException:  # the topic is not made yet
            return False
    wait_for(holds, 120, f"Debezium writes {records} change events to {topic}")


def _snapshots(state: str, work: Path, form: Form) -> tuple[pa.Table, pa.Table]:
    out, target = work / f"{form.name}-parquet", IcebergTarget(f"cdc.{form.name}", f"sqlite:///{work}/catalog.db")
    assert main(["snapshot", "--state-dir", state, "--format", "parquet", "--output", str(out),
                 "--value-format", "debezium", *form.extra]) == 0
    assert main(["snapshot", "--state-dir", state, "--iceberg-table", target.table, "--iceberg-catalog",
                 target.catalog, "--value-format", "debezium", *form.extra]) == 0
    return pq.read_table(out), _iceberg_rows(target)


def _spark_read(spark, state: str, form: Form) -> pa.Table:
    """The kcompact source's rows, through Arrow (a timestamp with a zone comes in the session's zone)."""
    df = spark.read.format("kcompact").option("valueFormat", "debezium") \
        .option("jsonNullDeletes", str("--json-null-deletes" in form.extra).lower()).load(state)
    table = df.toArrow()
    return table.cast(pa.schema([pa.field(f.name, pa.timestamp("us", tz="UTC") if getattr(f.type, "tz", None) else f.type)
                                 for f in table.schema]))


def _iceberg_rows(target: IcebergTarget) -> pa.Table | None:
    """The table's rows, strings and binaries in the types the other outputs give (pyiceberg reads the large
    ones); None while the table does not exist."""
    catalog = load_catalog(CATALOG_NAME, **target.settings())
    if not catalog.table_exists(target.table):
        return None
    table = catalog.load_table(target.table).scan().to_arrow()
    return table.cast(pa.schema([pa.field(f.name, _small(f.type)) for f in table.schema]))


def _small(kind: pa.DataType) -> pa.DataType:
    return pa.string() if pa.types.is_large_string(kind) else pa.binary() if pa.types.is_large_binary(kind) else kind


@pytest.mark.parametrize("form", [ENVELOPE, FLATTENED], ids=lambda f: f.name)
def test_the_snapshot_of_a_debezium_topic_equals_the_database_table(form, postgres, debezium_connect, spark,
                                                                     bootstrap_servers, tmp_path) -> None:
    run = uuid.uuid4().hex[:8]
    name, prefix = f"customers_{run}", f"cdc{run}"
    topic = f"{prefix}.public.{name}"
    with postgres.connect() as conn:
        customers = Customers(conn, name, seed=len(form.name))
        customers.change(300, 0, 0)
        debezium_connect.add_debezium(f"{form.name}_{run}", postgres, f"public.{name}", prefix, form.connector,
                                      PARTITIONS)
        try:
            state = str(tmp_path / "state")
            for wave in range(2):  # the second after a column is added: the outputs of the first evolve
                if wave:
                    customers.add_tier()
                customers.change(100, 900, 60)
                _topic_holds(bootstrap_servers, topic, customers.events + customers.deletes * form.events_per_delete)
                assert run_once(bootstrap_servers, topic, f"{topic}.compacted", state) == 0
                want = customers.rows()
                for table in (*_snapshots(state, tmp_path, form), _spark_read(spark, state, form)):
                    assert _table_rows(table, want) == want, wave
            _continuous(customers, topic, form, bootstrap_servers, tmp_path)
        finally:
            debezium_connect.remove(f"{form.name}_{run}")


def _continuous(customers: Customers, topic: str, form: Form, bootstrap: str, work: Path) -> None:
    """A job running with --snapshot-every keeps its Iceberg table equal to the database table while it
    changes, from a state dir of its own (its first snapshot takes the whole topic)."""
    target = IcebergTarget(f"cdc.{form.name}_live", f"sqlite:///{work}/catalog.db")
    extra = ("--snapshot-every", "1", "--iceberg-table", target.table, "--iceberg-catalog", target.catalog,
             "--snapshot-value-format", "debezium",
             *(("--snapshot-json-null-deletes",) if "--json-null-deletes" in form.extra else ()))
    (work / "live").mkdir()
    with RunningJob(bootstrap, topic, f"{topic}.live", work / "live", extra=extra,
                    state_dir=str(work / "live-state")) as job:
        customers.change(40, 300, 20)
        want = customers.rows()

        def equal() -> bool:
            job.running()
            table = _iceberg_rows(target)
            if table is None:
                return False
            try:
                return _table_rows(table, want) == want
            except AssertionError:  # a snapshot of the part of the topic read so far
                return False
        wait_for(equal, 240, "the job's Iceberg table equals the database table")
