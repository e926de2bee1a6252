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

from streaming.table.debezium import ChangeEventError, ChangeEvents

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
    row = {"type": "struct", "fields": fields, "optional": True, "name": "cdc.public.t.Value", "field": "after"}
    schema = {"type": "struct", "fields": [{**row, "field": "before"}, row,
                                           {"type": "struct", "fields": [], "optional": False, "field": "source"},
                                           {"type": "string", "optional": False, "field": "op"}],
              "optional": False, "name": "cdc.public.t.Envelope", "version": 2}
    payload = {"before": None, "after": after, "source": {"db": "shop"}, "op": op}
    return json.dumps({"schema": schema, "payload": payload}, separators=(",", ":")).encode()


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
    with pytest.raises(ChangeEventError, match="^t-0: column id is int32 in one Connect schema and string in another"):
        _read([_envelope("r", ROW), _envelope("u", {**ROW, "id": "x"}, text)])


def test_a_key_field_the_row_lacks_is_a_column_taken_from_the_key() -> None:
    keys = [json.dumps({"schema": {"type": "struct", "fields": [{"type": "string", "optional": False, "field": "region"}]},
                        "payload": {"region": r}}).encode() for r in ("eu", "us")]
    table, _ = _read([_envelope("c", ROW), _envelope("c", {**ROW, "id": 8})], keys=keys)
    assert table.column_names[0] == "region" and table.column("region").to_pylist() == ["eu", "us"]
