"""A database's change stream back as its table: Debezium's PostgreSQL connector on Kafka Connect writes a
real table's inserts, updates, deletes and an added column to topics, kcompact compacts them, and the
snapshot equals `SELECT * FROM customers`, every column typed as PostgreSQL has it. For the envelope with
Connect schemas, and for the flattened form (ExtractNewRecordState, whose deletes are JSON nulls); in
Parquet, in Iceberg, in the Spark source, and kept in step by a continuous run with --snapshot-every."""

from __future__ import annotations

import datetime as dt
import json
import random
import uuid
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from confluent_kafka import KafkaException
from psycopg.types.json import Jsonb
from pyiceberg.catalog import load_catalog

from streaming.cli.main import main
from streaming.iceberg.snapshot import CATALOG_NAME
from streaming.iceberg.target import IcebergTarget
from streaming.kafka.admin import Cluster
from streaming.partition_id import PartitionId
from tests.cdc.connect import FLATTEN, converters
from tests.e2e.helpers import NO_SINK_COMPACTION, run_once, wait_for
from tests.e2e.running_job import RunningJob

pytestmark = pytest.mark.integration
PARTITIONS = 3
COLUMNS = ("id int PRIMARY KEY, name text NOT NULL, email text, balance numeric(12,2), created date, "
           "updated_at timestamp, seen timestamptz, visits smallint, active boolean, score double precision")
TYPES = {"id": pa.int32(), "name": pa.string(), "email": pa.string(), "balance": pa.decimal128(12, 2),
         "created": pa.date32(), "updated_at": pa.timestamp("us"), "seen": pa.timestamp("us", tz="UTC"),
         "visits": pa.int32(), "active": pa.bool_(), "score": pa.float64(), "tier": pa.string()}
ORDER_TYPES = {"order_id": pa.int32(), "line": pa.int32(), "price": pa.string(), "amount": pa.decimal128(38, 10),
               "doc": pa.string(), "ref": pa.string(), "tags": pa.list_(pa.string())}


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


def _spark_read(spark, state: str, form: Form, **options: str) -> pa.Table:
    """The kcompact source's rows, through Arrow (a timestamp with a zone comes in the session's zone)."""
    df = spark.read.format("kcompact").option("valueFormat", "debezium") \
        .option("jsonNullDeletes", str("--json-null-deletes" in form.extra).lower()).options(**options).load(state)
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


ORDER_COLUMNS = ("order_id int, line int, price numeric, amount numeric(38,10), doc jsonb, ref uuid, tags text[], "
                 "PRIMARY KEY (order_id, line)")
AMOUNT_LIMITS = [Decimal("9999999999999999999999999999.9999999999"), Decimal("-9999999999999999999999999999.9999999999"),
                 Decimal("0.0000000001"), Decimal("0E-10")]
TINY = [Decimal("1E-20"), Decimal("0.0000001"), Decimal("7206989.0"), Decimal("123456789012345678901234567890.123456789"),
        Decimal("99999999999999999999999999999999999999999")]


class OrderLines:
    """A table with a composite key, numeric without scale (30 to 40 digits, tiny scales), numeric(38,10) at
    its limits, jsonb, uuid and text[]."""

    def __init__(self, conn, name: str, seed: int) -> None:
        self.conn, self.name, self.rng = conn, name, random.Random(seed)
        self.keys: list[tuple[int, int]] = []
        self.events = self.deletes = 0
        conn.execute(f"CREATE TABLE {name} ({ORDER_COLUMNS})")

    def _values(self) -> tuple:
        r = self.rng
        if r.random() < 0.2:
            price = r.choice(TINY)
        else:  # exact from its text: no context rounds it
            price = Decimal(f"{r.choice([-1, 1]) * r.randrange(10 ** 29, 10 ** 40)}E-{r.choice([0, 1, 2, 9, 20, 25])}")
        amount = r.choice(AMOUNT_LIMITS) if r.random() < 0.3 else Decimal(f"{r.randrange(-10 ** 38 + 1, 10 ** 38)}E-10")
        doc = Jsonb({"n": r.randrange(1000), "nested": {"x": r.random(), "tags": ["a", "b"][: r.randrange(3)]}})
        tags = None if r.random() < 0.2 else [f"t{r.randrange(9)}" for _ in range(r.randrange(1, 4))]
        return price, amount, doc, str(uuid.UUID(int=r.getrandbits(128))), tags

    def change(self, inserts: int, updates: int, deletes: int) -> None:
        with self.conn.transaction():
            for _ in range(inserts):
                key = (self.rng.randrange(10 ** 6), self.rng.randrange(1, 50))
                if key in self.keys:
                    continue
                self.conn.execute(f"INSERT INTO {self.name} VALUES (%s, %s, %s, %s, %s, %s, %s)", (*key, *self._values()))
                self.keys.append(key)
                self.events += 1
            for _ in range(updates):
                key = self.rng.choice(self.keys)
                self.conn.execute(f"UPDATE {self.name} SET price=%s, amount=%s, doc=%s, ref=%s, tags=%s "
                                  f"WHERE order_id=%s AND line=%s", (*self._values(), *key))
                self.events += 1
            for _ in range(deletes):
                key = self.keys.pop(self.rng.randrange(len(self.keys)))
                self.conn.execute(f"DELETE FROM {self.name} WHERE order_id=%s AND line=%s", key)
                self.deletes += 1

    def rows(self) -> list[dict]:
        cur = self.conn.execute(f"SELECT * FROM {self.name} ORDER BY order_id, line")
        names = [d.name for d in cur.description]
        return [dict(zip(names, r, strict=True)) for r in cur.fetchall()]


def _same(table: pa.Table, want: list[dict], key: tuple[str, ...]) -> None:
    """The output's rows equal the database's column by column, each in the output's type: numeric without
    scale as its exact plain text (with the trailing zeros Debezium sends: it strips them), jsonb as its JSON,
    uuid as its text."""
    columns = [c for c in table.column_names if not c.startswith("__")]
    assert columns == (list(want[0]) if want else columns)
    for c in columns:
        kind = table.schema.field(c).type
        expected = {**TYPES, **ORDER_TYPES, "score": pa.string() if want and isinstance(want[0]["score"], str)
                    else pa.float64()} if "score" in columns else ORDER_TYPES
        assert (kind.value_type if pa.types.is_list(kind) else kind) == \
            (expected[c].value_type if pa.types.is_list(expected[c]) else expected[c]), c
    got = sorted(table.select(columns).to_pylist(), key=lambda r: tuple(r[k] for k in key))
    assert len(got) == len(want)
    for have, row in zip(got, want, strict=True):
        for c, value in row.items():
            if isinstance(value, Decimal) and isinstance(have[c], str):  # exact plain text, no exponent; Debezium
                assert "E" not in have[c] and Decimal(have[c]) == value, (c, row)  # drops trailing zeros
            elif isinstance(value, (dict, list)) and isinstance(have[c], str):
                assert json.loads(have[c]) == value, (c, row)
            elif isinstance(value, uuid.UUID):
                assert have[c] == str(value), (c, row)
            else:
                assert have[c] == value, (c, row, have[c])


def test_two_tables_in_one_job_are_two_iceberg_tables_equal_to_select_star_through_every_change(
        postgres, debezium_connect, spark, bootstrap_servers, tmp_path, capsys) -> None:
    """Each step: the job's table per source table, and a Parquet snapshot per topic, equal SELECT *. A
    column added with a DEFAULT is the default in the rows not changed since; a type change blocks its
    table (one line, status says so) while the other table flows, and --from-schema latest is the way out."""
    run = uuid.uuid4().hex[:8]
    names, prefix = (f"customers_{run}", f"order_lines_{run}"), f"two{run}"
    topics = [f"{prefix}.public.{n}" for n in names]
    catalog = f"sqlite:///{tmp_path}/catalog.db"
    state = str(tmp_path / "state")
    settings = {**converters(True), "value.converter.replace.null.with.default": "false"}
    with postgres.connect() as conn:
        customers, orders = Customers(conn, names[0], seed=11), OrderLines(conn, names[1], seed=12)
        customers.change(120, 0, 0)
        orders.change(150, 0, 0)
        debezium_connect.add_debezium(f"two_{run}", postgres, ",".join(f"public.{n}" for n in names), prefix,
                                      settings, PARTITIONS)

        def job_step(check_customers: bool = True) -> None:
            _topic_holds(bootstrap_servers, topics[0], customers.events + customers.deletes * 2)
            _topic_holds(bootstrap_servers, topics[1], orders.events + orders.deletes * 2)
            # an uncompacted sink (NO_SINK_COMPACTION): the table is read against every change emitted
            assert main(["run", "--bootstrap-servers", bootstrap_servers, *(a for t in topics for a in ("--source-topic", t)),
                         "--sink-topic-template", "{topic}.compacted", "--state-dir", state, "--once",
                         *NO_SINK_COMPACTION, "--snapshot-every", "0", "--iceberg-table", "cdc.{table}",
                         "--iceberg-catalog", catalog, "--snapshot-value-format", "debezium"]) == 0
            assert main(["snapshot", "--state-dir", state, "--format", "parquet", "--output", str(tmp_path / "pq" / "{table}"),
                         "--value-format", "debezium"]) == (0 if check_customers else 2)
            tables = [(customers, ("id",), names[0]), (orders, ("order_id", "line"), names[1])]
            for (source, key, name), topic in list(zip(tables, topics, strict=True))[0 if check_customers else 1:]:
                want = source.rows()
                for table in (_iceberg_rows(IcebergTarget(f"cdc.{name}", catalog)), pq.read_table(tmp_path / "pq" / name),
                              _spark_read(spark, state, ENVELOPE, topic=topic)):
                    _same(table, want, key)

        try:
            job_step()
            conn.execute(f"ALTER TABLE {names[0]} ADD COLUMN tier text DEFAULT 'basic'")
            customers.tier = True
            customers.change(10, 30, 5)  # most rows keep their records from before the column
            orders.change(20, 60, 10)
            job_step()
            conn.execute(f"ALTER TABLE {names[0]} ALTER COLUMN score TYPE text")
            changed = conn.execute(f"UPDATE {names[0]} SET score = 'text ' || id WHERE id % 9 = 0").rowcount
            customers.events += changed
            orders.change(10, 40, 5)
            capsys.readouterr()
            job_step(check_customers=False)  # blocked; the order lines flow
            said = capsys.readouterr()
            assert said.err.count(f"snapshot of table cdc.{names[0]} blocked") == 1, said.err
            assert main(["status", "--state-dir", state]) == 0
            assert f"table cdc.{names[0]}: BLOCKED since" in capsys.readouterr().out
            for target in (["--iceberg-table", "latest.{table}", "--iceberg-catalog", catalog],
                           ["--format", "parquet", "--output", str(tmp_path / "latest" / "{table}")]):
                assert main(["snapshot", "--state-dir", state, "--value-format", "debezium", "--from-schema", "latest",
                             "--topic", topics[0], *target]) == 0
            want = customers.rows()
            assert {type(r["score"]) for r in want} == {str}
            for table in (_iceberg_rows(IcebergTarget(f"latest.{names[0]}", catalog)),
                          pq.read_table(tmp_path / "latest" / names[0]),
                          _spark_read(spark, state, ENVELOPE, topic=topics[0], fromSchema="latest")):
                _same(table, want, ("id",))
        finally:
            debezium_connect.remove(f"two_{run}")
