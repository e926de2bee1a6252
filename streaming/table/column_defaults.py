"""A column's default, as the Connect schema that added it gives it, kept on the output's Arrow field, so rows
written under an older schema (without the column) read it as the database gives them: PostgreSQL fills an
added column's default into every existing row, and Debezium puts that default in the field's schema.

The default is kept as the field's Connect schema and its JSON value, and made an array by the same
converter as the column's own values, so it is exact in every type the values are."""

from __future__ import annotations

import json

import pyarrow as pa

from streaming.table.connect_types import field_type

DEFAULT_KEY = b"kcompact.connect.default"


def with_default(field: pa.Field, schema: dict) -> pa.Field:
    """``field`` carrying the default of its Connect ``schema``; unchanged when the schema has none."""
    if schema.get("default") is None:
        return field
    text = json.dumps({"schema": {k: v for k, v in schema.items() if k != "field"}, "value": schema["default"]},
                      sort_keys=True)
    return field.with_metadata({**(field.metadata or {}), DEFAULT_KEY: text.encode()})


def has_default(field: pa.Field) -> bool:
    return DEFAULT_KEY in (field.metadata or {})


def defaults_of(schema: pa.Schema) -> dict[str, str]:
    """Each defaulted column's kept default (text), to carry where field metadata is not kept (an Iceberg
    table's properties)."""
    return {f.name: f.metadata[DEFAULT_KEY].decode() for f in schema if has_default(f)}


def restored(schema: pa.Schema, defaults: dict[str, str]) -> pa.Schema:
    """``schema`` with the defaults ``defaults_of`` gave put back on its fields."""
    return pa.schema([f.with_metadata({**(f.metadata or {}), DEFAULT_KEY: defaults[f.name].encode()})
                      if f.name in defaults else f for f in schema], metadata=schema.metadata)


def filled(field: pa.Field, rows: int) -> pa.Array:
    """The column for ``rows`` rows that lack it: its default in each, or null where it has none."""
    if not has_default(field):
        return pa.nulls(rows, field.type)
    kept = json.loads(field.metadata[DEFAULT_KEY])
    value = field_type(kept["schema"])[1]([kept["value"]])
    return pa.repeat(value[0], rows).cast(field.type) if rows else pa.array([], field.type)
