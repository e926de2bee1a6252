"""Debezium change events as rows: the envelope's `after` and the flattened value, typed by the Connect
schema JsonConverter writes (decimals, dates, times, timestamps), deletes as no row, and every shape that is
not a change event refused in one line naming the partition. The messages are as Debezium 3.6.1 on
Connect 4.3.0 writes them (tests/e2e/test_cdc_tables.py runs the real connector)."""

from __future__ import annotations

import base64
import datetime as dt
import json
from decimal import Decimal

import pyarrow as pa
import pytest

from streaming.table.column_defaults import filled, has_default
from streaming.table.debezium import ChangeEventError, ChangeEvents
from streaming.table.evolution import SchemaChangeError
from streaming.table.lossless import float_text
from tests.table.change_events import envelope

ROW_FIELDS = [
    {"type": "int32", "optional": False, "field": "id"},
    {"type": "bytes", "optional": True, "name": "org.apache.kafka.connect.data.Decimal", "version": 1,
     "parameters": {"scale": "2", "connect.decimal.precision": "12"}, "field": "balance"},
    {"type": "int32", "optional": True, "name": "io.debezium.time.Date", "version": 1, "field": "created"},
    {"type": "int64", "optional": True, "name": "io.debezium.time.MicroTimestamp", "version": 1, "field": "updated_at"},
    {"type": "string", "optional": True, "name": "io.debezium.time.ZonedTimestamp", "version": 1, "field": "seen"},
    {"type": "int64", "optional": True, "name": "io.debezium.time.MicroTime", "version": 1, "field": "at"},
    {"type": "int16", "optional": True, "field": "visits"},
]
ROW = {"id": 7, "balance": base64.b64encode((-1234).to_bytes(2, "big", signed=True)).decode(), "created": 20456,
       "updated_at": 1795834003474844, "seen": "2026-11-28T02:46:43.474844Z", "at": 3_600_000_001, "visits": 4}
TYPED = {"id": 7, "balance": Decimal("-12.34"), "created": dt.date(2026, 1, 3),
         "updated_at": dt.datetime(2026, 11, 28, 2, 46, 43, 474844),
         "seen": dt.datetime(2026, 11, 28, 2, 46, 43, 474844, tzinfo=dt.timezone.utc),
         "at": dt.time(1, 0, 0, 1), "visits": 4}


def _read(values: list[bytes], null_deletes: bool = False, where: str = "t-0", keys: list[bytes] | None = None):
    return ChangeEvents(null_deletes).rows(values, keys or [b'{"id": 7}'] * len(values), where)


def _envelope(op: str, after: dict | None, fields: list[dict] = ROW_FIELDS) -> bytes:
    return envelope(op, after, fields)


def _flattened(row: dict | None, fields: list[dict] = ROW_FIELDS) -> bytes:
    schema = {"type": "struct", "fields": fields, "optional": row is None, "name": "cdc.public.t.Value"}
    return json.dumps({"schema": schema, "payload": row}, separators=(",", ":")).encode()


def test_the_envelope_after_is_the_row_typed_by_its_connect_schema() -> None:
    table, kept = _read([_envelope("c", ROW), _envelope("d", None)])
    assert kept == [0]  # the delete's key has no row
    assert table.to_pylist() == [TYPED]
    assert table.schema.field("balance").type == pa.decimal128(12, 2)
    assert table.schema.field("visits").type == pa.int32()  # Iceberg's smallest integer


def test_the_flattened_form_is_read_and_its_json_null_is_a_delete_only_when_asked() -> None:
    values = [_flattened(ROW), _flattened(None)]
    table, kept = _read(values, True, "t-1")
    assert kept == [0] and table.to_pylist() == [TYPED]
    with pytest.raises(ChangeEventError, match="^t-1: a value is JSON null.*--json-null-deletes"):
        _read(values, False, "t-1")


def test_a_column_added_at_the_source_is_a_column_null_in_rows_written_before() -> None:
    wider = [*ROW_FIELDS, {"type": "string", "optional": True, "field": "tier"}]
    table, _ = _read([_envelope("r", ROW), _envelope("u", {**ROW, "id": 8, "tier": "gold"}, wider)])
    assert table.column_names[-1] == "tier" and table.column("tier").to_pylist() == [None, "gold"]


def test_without_a_schema_types_are_inferred_and_added_fields_are_not_columns() -> None:
    values = [b'{"id": 1, "name": "a", "__deleted": "false", "__op": "c"}', b'{"id": 2, "name": "b", "__deleted": "true"}',
              b'{"id": 3, "name": null, "note": null}']
    table, kept = _read(values)
    assert kept == [0, 2]  # rewrite mode's __deleted=true is a delete
    assert table.schema == pa.schema([("id", pa.int64()), ("name", pa.string()), ("note", pa.string())])


@pytest.mark.parametrize("value,words", [(b"not json", "not JSON"), (b"[1]", "not a JSON object"),
                                         (b'{"id": 1}\n{"id": "x"}', "not JSON")])
def test_a_value_that_is_not_a_change_event_is_one_line_naming_the_partition(value, words) -> None:
    with pytest.raises(ChangeEventError, match=f"^t-4: .*{words}"):
        _read([value], False, "t-4")


def test_a_value_that_does_not_fit_its_schema_is_one_line_naming_the_column() -> None:
    with pytest.raises(ChangeEventError, match="^t-0: column created's values do not fit its Connect schema"):
        _read([_envelope("c", {**ROW, "created": "yesterday"})])


def test_an_integer_column_widened_at_the_source_widens_and_another_type_change_is_refused() -> None:
    wide = [{**f, "type": "int64"} if f["field"] == "id" else f for f in ROW_FIELDS]
    table, _ = _read([_envelope("r", ROW), _envelope("u", {**ROW, "id": 2**40}, wide)])
    assert table.schema.field("id").type == pa.int64() and table.column("id").to_pylist() == [7, 2**40]
    text = [{**f, "type": "string"} if f["field"] == "id" else f for f in ROW_FIELDS]
    with pytest.raises(SchemaChangeError, match="^t-0: column id is int32 in one Connect schema and string in "
                                                "another: .*--from-schema latest"):
        _read([_envelope("r", ROW), _envelope("u", {**ROW, "id": "x"}, text)])


SCORE = {"type": "double", "optional": True, "field": "score"}
TIER = {"type": "string", "optional": True, "default": "basic", "field": "tier"}


def _latest(values: list[bytes], timestamps: list[int]) -> pa.Table:
    events = ChangeEvents(False)
    events.learn(values, timestamps, "t-0")
    return events.rows(values, [b'{"id": 7}'] * len(values), "t-0")[0]


def test_a_column_added_with_a_default_gives_it_to_the_rows_written_before_it() -> None:
    table, _ = _read([_envelope("r", ROW), _envelope("u", {**ROW, "id": 8, "tier": None}, ROW_FIELDS + [TIER]),
                      _envelope("u", {**ROW, "id": 9, "tier": "gold"}, ROW_FIELDS + [TIER])])
    assert table.column("tier").to_pylist() == ["basic", None, "gold"]  # a NULL written as such stays NULL
    assert has_default(table.schema.field("tier"))
    assert filled(table.schema.field("tier"), 2).to_pylist() == ["basic", "basic"]


def test_a_column_added_without_a_default_is_null_in_the_older_rows() -> None:
    table, _ = _read([_envelope("r", ROW), _envelope("u", {**ROW, "score": 1.5}, ROW_FIELDS + [SCORE])])
    assert table.column("score").to_pylist() == [None, 1.5]


def test_from_the_latest_schema_older_rows_are_converted_as_postgresql_converts_a_column() -> None:
    text = [{**SCORE, "type": "string"}]
    values = [_envelope("r", {**ROW, "score": 100.0}, ROW_FIELDS + [SCORE]),
              _envelope("r", {**ROW, "score": 1e-05}, ROW_FIELDS + [SCORE]),
              _envelope("u", {**ROW, "score": "high"}, ROW_FIELDS[:1] + text)]
    table = _latest(values, [1, 2, 3])
    assert table.column_names == ["id", "score"]  # the newest schema's columns: the dropped ones are gone
    assert table.column("score").to_pylist() == ["100", "1e-05", "high"]


def test_from_the_latest_schema_a_change_that_would_lose_values_is_refused_in_one_line() -> None:
    values = [_envelope("r", {**ROW, "score": "high"}, ROW_FIELDS + [{**SCORE, "type": "string"}]),
              _envelope("u", {**ROW, "score": 2.5}, ROW_FIELDS + [SCORE])]
    with pytest.raises(SchemaChangeError, match="^t-0: column score is string in rows written under an older"):
        _latest(values, [1, 2])


def test_the_newest_schema_is_the_one_of_the_latest_record_whatever_its_place() -> None:
    values = [_envelope("u", {**ROW, "score": "x"}, ROW_FIELDS + [{**SCORE, "type": "string"}]),
              _envelope("r", {**ROW, "score": 2.5}, ROW_FIELDS + [SCORE])]
    assert _latest(values, [9, 1]).column("score").to_pylist() == ["x", "2.5"]


@pytest.mark.parametrize("value, text", [(100.0, "100"), (123.456, "123.456"), (1e-05, "1e-05"), (0.0001, "0.0001"),
                                         (1e15, "1e+15"), (123456789012345.0, "123456789012345"), (-0.0, "-0"),
                                         (1.5e300, "1.5e+300"), (2.5e-310, "2.5e-310"), (float("nan"), "NaN"),
                                         (float("-inf"), "-Infinity"), (0.1 + 0.2, "0.30000000000000004")])
def test_a_double_as_text_is_what_postgresql_writes(value: float, text: str) -> None:
    assert float_text(value) == text


def test_a_key_field_the_row_lacks_is_a_column_taken_from_the_key() -> None:
    keys = [json.dumps({"schema": {"type": "struct", "fields": [{"type": "string", "optional": False, "field": "region"}]},
                        "payload": {"region": r}}).encode() for r in ("eu", "us")]
    table, _ = _read([_envelope("c", ROW), _envelope("c", {**ROW, "id": 8})], keys=keys)
    assert table.column_names[0] == "region" and table.column("region").to_pylist() == ["eu", "us"]


def test_each_schema_versions_rows_are_read_in_its_own_unit() -> None:
    """timestamp(3) altered to timestamp(6): Debezium's Timestamp (ms) then MicroTimestamp (µs), one Arrow type."""
    millis = [{"type": "int64", "optional": True, "name": "io.debezium.time.Timestamp", "version": 1, "field": "at"}]
    micros = [{**millis[0], "name": "io.debezium.time.MicroTimestamp"}]
    at = dt.datetime(2026, 11, 28, 2, 46, 43, 474000)
    values = [_envelope("r", {"id": 1, "at": 1795834003474}, ROW_FIELDS[:1] + millis),
              _envelope("u", {"id": 2, "at": 1795834003474000}, ROW_FIELDS[:1] + micros)]
    assert _read(values)[0].column("at").to_pylist() == [at, at]
    assert _latest(values, [1, 2]).column("at").to_pylist() == [at, at]


def test_a_row_without_a_column_takes_its_default_only_when_written_before_the_column() -> None:
    """ADD COLUMN tier DEFAULT 'basic' at 10, DROP COLUMN tier at 20: PostgreSQL gave the default to the rows
    it held at 10; a row written after the drop has no such column, so the table's is null."""
    events = ChangeEvents(False)
    values = [_envelope("r", ROW), _envelope("u", {**ROW, "id": 8, "tier": "gold"}, ROW_FIELDS + [TIER]),
              _envelope("u", {**ROW, "id": 9})]
    table = events.rows(values, [b'{"id": 7}'] * 3, "t-0", [5, 10, 25])[0]
    assert table.column("tier").to_pylist() == ["basic", "gold", None]


def test_a_column_added_without_a_default_stays_null_in_older_rows_though_a_default_was_set_later() -> None:
    """ADD COLUMN score (no default) at 10, then SET DEFAULT 5 at 20: rows held at 10 are NULL in PostgreSQL."""
    later = [{**SCORE, "default": 5.0}]
    values = [_envelope("r", ROW), _envelope("u", {**ROW, "id": 8, "score": 1.0}, ROW_FIELDS + [SCORE]),
              _envelope("u", {**ROW, "id": 9, "score": 2.0}, ROW_FIELDS + later)]
    table = ChangeEvents(False).rows(values, [b'{"id": 7}'] * 3, "t-0", [5, 10, 20])[0]
    assert table.column("score").to_pylist() == [None, 1.0, 2.0]
