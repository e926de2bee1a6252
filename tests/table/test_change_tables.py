"""A change stream's tables in both outputs (Parquet and Iceberg), as the database has them: a column added
with a default takes it in the rows written before, a type change blocks an output until a new one is
written from the newest schema, each topic has its own output by a template (merging them is refused
unless asked for), and a decimal wider than Iceberg's 38 digits is its exact text there."""

from __future__ import annotations

import base64
import json
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.catalog import load_catalog

from streaming.cli.main import main
from streaming.iceberg import snapshot_to
from streaming.iceberg.snapshot import CATALOG_NAME
from streaming.iceberg.target import IcebergTarget
from streaming.partition_id import PartitionId
from streaming.table.evolution import SchemaChangeError
from streaming.table.parquet_snapshot import write_parquet
from streaming.table.values import FromSchema, ValueFormat, ValueFormatError, ValueSpec
from tests.table.change_events import envelope
from tests.table.state_dirs import StateDirModel, append_values

CUSTOMERS, ORDERS = "cdc.public.customers", "cdc.public.orders"
ID = {"type": "int32", "optional": False, "field": "id"}
NAME = {"type": "string", "optional": True, "field": "name"}
TIER = {"type": "string", "optional": True, "default": "basic", "field": "tier"}
SCORE = {"type": "double", "optional": True, "field": "score"}
SCORE_TEXT = {**SCORE, "type": "string"}
WIDE = {"type": "bytes", "optional": True, "name": "org.apache.kafka.connect.data.Decimal", "version": 1,
        "parameters": {"scale": "3", "connect.decimal.precision": "45"}, "field": "wide"}
DEBEZIUM = ValueSpec(ValueFormat.DEBEZIUM)
LATEST = ValueSpec(ValueFormat.DEBEZIUM, from_schema=FromSchema.LATEST)


def _model(tmp_path: Path, partitions: int = 2) -> StateDirModel:
    model = StateDirModel(str(tmp_path / "state"), partitions)
    model.save({CUSTOMERS: "offset", ORDERS: "offset"})
    return model


def _write(model: StateDirModel, topic: str, partition: int, rows: list[tuple[dict, list[dict]]]) -> None:
    append_values(model, PartitionId(topic, partition),
                  [(json.dumps({"id": r["id"]}).encode(), envelope("u", r, fields)) for r, fields in rows])


def _iceberg(tmp_path: Path, name: str) -> IcebergTarget:
    return IcebergTarget(name, f"sqlite:///{tmp_path}/catalog.db")


def _rows(table: pa.Table, *columns: str) -> list[tuple]:
    return sorted(tuple(r[c] for c in columns) for r in table.to_pylist())


def _iceberg_table(target: IcebergTarget) -> pa.Table:
    return load_catalog(CATALOG_NAME, **target.settings()).load_table(target.table).scan().to_arrow()


def _both(model: StateDirModel, tmp_path: Path, spec: ValueSpec, out: str, table: str) -> tuple[pa.Table, pa.Table]:
    write_parquet(model.uri, str(tmp_path / out), spec, frozenset({CUSTOMERS}))
    snapshot_to(model.uri, _iceberg(tmp_path, table), spec, frozenset({CUSTOMERS}))
    return pq.read_table(tmp_path / out), _iceberg_table(_iceberg(tmp_path, table))


def test_a_column_added_with_a_default_gives_it_to_every_row_written_before_it_in_both_outputs(tmp_path) -> None:
    model = _model(tmp_path)
    _write(model, CUSTOMERS, 0, [({"id": i, "name": f"n{i}"}, [ID, NAME]) for i in range(4)])
    _write(model, CUSTOMERS, 1, [({"id": i, "name": f"n{i}"}, [ID, NAME]) for i in range(4, 6)])
    _both(model, tmp_path, DEBEZIUM, "out", "s.customers")
    # ALTER TABLE ADD COLUMN tier text DEFAULT 'basic', then two rows changed: partition 0 has none of them
    _write(model, CUSTOMERS, 1, [({"id": 4, "name": "n4", "tier": "gold"}, [ID, NAME, TIER]),
                                 ({"id": 6, "name": "n6", "tier": None}, [ID, NAME, TIER])])
    for table in _both(model, tmp_path, DEBEZIUM, "out", "s.customers"):
        assert _rows(table, "id", "tier") == [(0, "basic"), (1, "basic"), (2, "basic"), (3, "basic"), (4, "gold"),
                                              (5, "basic"), (6, None)]
    parquet, iceberg = _both(model, tmp_path, DEBEZIUM, "out", "s.customers")  # nothing new: the same
    assert _rows(iceberg, "id", "tier")[0] == (0, "basic")


def test_a_type_change_blocks_an_output_and_the_newest_schema_is_the_way_out(tmp_path) -> None:
    model = _model(tmp_path)
    _write(model, CUSTOMERS, 0, [({"id": 1, "name": "a", "score": 100.0}, [ID, NAME, SCORE]),
                                 ({"id": 2, "name": "b", "score": 0.1 + 0.2}, [ID, NAME, SCORE])])
    _both(model, tmp_path, DEBEZIUM, "out", "s.customers")
    # ALTER COLUMN score TYPE text, ALTER TABLE DROP COLUMN name, then a row changed
    _write(model, CUSTOMERS, 1, [({"id": 3, "score": "high"}, [ID, SCORE_TEXT])])
    with pytest.raises(SchemaChangeError, match="--from-schema latest"):
        write_parquet(model.uri, str(tmp_path / "out"), DEBEZIUM, frozenset({CUSTOMERS}))
    with pytest.raises(SchemaChangeError, match="--from-schema latest"):
        snapshot_to(model.uri, _iceberg(tmp_path, "s.customers"), DEBEZIUM, frozenset({CUSTOMERS}))
    with pytest.raises(SchemaChangeError, match="an Iceberg column keeps its type"):  # not into the old table
        snapshot_to(model.uri, _iceberg(tmp_path, "s.customers"), LATEST, frozenset({CUSTOMERS}))
    for table in _both(model, tmp_path, LATEST, "latest", "s.customers_latest"):
        assert [c for c in table.column_names if not c.startswith("__")] == ["id", "score"]
        assert _rows(table, "id", "score") == [(1, "100"), (2, "0.30000000000000004"), (3, "high")]


def test_each_topic_has_an_output_of_its_own_by_a_template_and_merging_them_is_asked_for(tmp_path, capsys) -> None:
    model = _model(tmp_path, partitions=1)
    _write(model, CUSTOMERS, 0, [({"id": 1, "name": "a"}, [ID, NAME])])
    _write(model, ORDERS, 0, [({"id": 7, "score": 2.5}, [ID, SCORE])])
    common = ["snapshot", "--state-dir", model.uri, "--value-format", "debezium"]
    assert main([*common, "--format", "parquet", "--output", str(tmp_path / "one")]) == 2
    assert "would merge the columns of 2 topics" in capsys.readouterr().err
    assert main([*common, "--format", "parquet", "--output", str(tmp_path / "pq" / "{table}")]) == 0
    assert main([*common, "--iceberg-table", "shop.{table}", "--iceberg-catalog", f"sqlite:///{tmp_path}/catalog.db"]) == 0
    for name, columns in (("customers", ["id", "name"]), ("orders", ["id", "score"])):
        for table in (pq.read_table(tmp_path / "pq" / name), _iceberg_table(_iceberg(tmp_path, f"shop.{name}"))):
            assert [c for c in table.column_names if not c.startswith("__")] == columns
    assert main([*common, "--format", "parquet", "--output", str(tmp_path / "one"), "--one-table"]) == 0
    assert set(pq.read_table(tmp_path / "one").column_names) >= {"name", "score"}


def test_a_decimal_wider_than_38_digits_is_decimal256_in_parquet_and_its_exact_text_in_iceberg(tmp_path) -> None:
    model = _model(tmp_path)
    unscaled = -(10 ** 44 - 1)
    value = base64.b64encode(unscaled.to_bytes(19, "big", signed=True)).decode()
    _write(model, CUSTOMERS, 0, [({"id": 1, "wide": value}, [ID, WIDE])])
    parquet, iceberg = _both(model, tmp_path, DEBEZIUM, "out", "s.customers")
    assert parquet.schema.field("wide").type == pa.decimal256(45, 3)
    assert parquet.column("wide").to_pylist() == [Decimal("-99999999999999999999999999999999999999999.999")]
    assert iceberg.column("wide").to_pylist() == ["-99999999999999999999999999999999999999999.999"]


def test_from_the_latest_schema_a_partition_left_without_rows_is_emptied_in_both_outputs(tmp_path) -> None:
    model = _model(tmp_path)
    _write(model, CUSTOMERS, 0, [({"id": 1, "name": "a"}, [ID, NAME])])
    _write(model, CUSTOMERS, 1, [({"id": 2, "name": "b"}, [ID, NAME])])
    _both(model, tmp_path, LATEST, "out", "s.customers")
    append_values(model, PartitionId(CUSTOMERS, 0), [(json.dumps({"id": 1}).encode(), None)])  # its tombstone
    for table in _both(model, tmp_path, LATEST, "out", "s.customers"):
        assert _rows(table, "id", "name") == [(2, "b")]


def test_from_the_latest_schema_one_output_of_two_topics_is_refused(tmp_path) -> None:
    model = _model(tmp_path, partitions=1)
    _write(model, CUSTOMERS, 0, [({"id": 1, "name": "a"}, [ID, NAME])])
    _write(model, ORDERS, 0, [({"id": 7, "score": 2.5}, [ID, SCORE])])
    with pytest.raises(ValueFormatError, match="--from-schema latest reads one topic's newest schema"):
        write_parquet(model.uri, str(tmp_path / "one"), LATEST)


def test_from_the_latest_schema_a_later_snapshot_reads_only_what_changed_and_keeps_the_newest_schema(tmp_path) -> None:
    """The newest schema is kept by the output: a partition re-read for a delete, whose rows are all older,
    is still read in it, and a partition that did not change is not read at all."""
    model = _model(tmp_path)
    _write(model, CUSTOMERS, 0, [({"id": 1, "score": 1.5}, [ID, SCORE]), ({"id": 2, "score": 2.5}, [ID, SCORE])])
    _write(model, CUSTOMERS, 1, [({"id": 3, "score": "high"}, [ID, SCORE_TEXT])])
    _both(model, tmp_path, LATEST, "out", "s.customers")
    append_values(model, PartitionId(CUSTOMERS, 0), [(json.dumps({"id": 1}).encode(), None)])
    report = write_parquet(model.uri, str(tmp_path / "out"), LATEST, frozenset({CUSTOMERS}))
    assert report.unchanged == 1
    for table in _both(model, tmp_path, LATEST, "out", "s.customers"):
        assert _rows(table, "id", "score") == [(2, "2.5"), (3, "high")]
