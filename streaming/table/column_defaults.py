"""Where a column began, kept on the output's Arrow field, so rows written without it read it as the
database gives them: PostgreSQL fills an added column's default into every row it already holds (null when
the column has none), and Debezium puts that default in the field's Connect schema.

A row lacks a column for two reasons: it was written before the column was added (it takes the default of
the schema version that added it), or after the column was dropped (null). The field keeps the time of the
earliest record that had the column; a row lacking it takes the default only when it is older than that.
The default is kept as the field's Connect schema and its JSON value, and made an array by the same
converter as the column's own values, so it is exact in every type the values are."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.compute as pc

from streaming.table.connect_types import exact_text, field_type

DEFAULT_KEY = b"kcompact.connect.default"  # the Connect schema that added the column, and its default
SINCE_KEY = b"kcompact.connect.since"  # the earliest record with the column, ms (absent: not known)


def default_text(schema: dict) -> bytes:
    """A column's Connect schema and default, as a field keeps them (made once per schema version)."""
    return json.dumps({"schema": {k: v for k, v in schema.items() if k != "field"}, "value": schema.get("default")},
                      sort_keys=True, default=str).encode()


def with_default(field: pa.Field, text: bytes, since_ms: int | None) -> pa.Field:
    """``field`` carrying where it began: default_text of the Connect schema that added it, and the time of
    the earliest record with it (None: not known, every row without it is older)."""
    return field.with_metadata({**(field.metadata or {}), DEFAULT_KEY: text,
                                **({SINCE_KEY: str(since_ms).encode()} if since_ms is not None else {})})


def _since(field: pa.Field) -> int | None:
    text = (field.metadata or {}).get(SINCE_KEY)
    return None if text is None else int(text)


def has_default(field: pa.Field) -> bool:
    text = (field.metadata or {}).get(DEFAULT_KEY)
    return text is not None and json.loads(text)["value"] is not None


def earliest(a: pa.Field, b: pa.Field) -> dict[bytes, bytes] | None:
    """The metadata of the field that began earlier (a known time before an unknown one), for a column
    that two schemas hold: the first default is the one rows written before the column took."""
    first, second = _since(a), _since(b)
    if DEFAULT_KEY not in (a.metadata or {}) or (second is not None and (first is None or second < first)):
        return {**(a.metadata or {}), **(b.metadata or {})} or None
    return {**(b.metadata or {}), **(a.metadata or {})} or None


def defaults_of(schema: pa.Schema) -> dict[str, str]:
    """Each column's kept beginning (text), to carry where field metadata is not kept (an Iceberg table's
    properties, a Spark field's metadata)."""
    return {f.name: json.dumps({"default": f.metadata[DEFAULT_KEY].decode(), "since": _since(f)})
            for f in schema if DEFAULT_KEY in (f.metadata or {})}


def restored(schema: pa.Schema, defaults: dict[str, str]) -> pa.Schema:
    """``schema`` with the beginnings ``defaults_of`` gave put back on its fields."""
    def field(f: pa.Field) -> pa.Field:
        kept = json.loads(defaults[f.name])
        return with_default(f, kept["default"].encode(), kept["since"])
    return pa.schema([field(f) if f.name in defaults else f for f in schema], metadata=schema.metadata)


def filled(field: pa.Field, rows: int, timestamps_ms: pa.Array | None = None) -> pa.Array:
    """The column for ``rows`` rows that lack it: its default in each row older than the column (all of
    them when the time is not known), null in the others and where it has no default."""
    text = (field.metadata or {}).get(DEFAULT_KEY)
    kept = None if text is None else json.loads(text)
    if kept is None or kept["value"] is None or not rows:
        return pa.nulls(rows, field.type)
    value = field_type(kept["schema"])[1]([kept["value"]])
    value = exact_text(value) if pa.types.is_decimal(value.type) and pa.types.is_string(field.type) else value
    defaults = pa.repeat(value[0], rows).cast(field.type)
    since = _since(field)
    if since is None or timestamps_ms is None:
        return defaults
    older = pc.fill_null(pc.less(timestamps_ms, since), True)
    return pc.if_else(older, defaults, pa.nulls(rows, field.type))
