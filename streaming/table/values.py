"""The value column of a snapshot: the bytes as they are, UTF-8 text, or JSON objects expanded into a struct
column (``value.amount`` in SQL).

A JSON schema is inferred once, by the first snapshot from the first partition with values, and then kept by
the output (a Parquet file's schema, an Iceberg table's): a later value with a field the schema lacks keeps
the known fields, and one whose field changed type is refused, so a column never changes type under its
readers.
"""

from __future__ import annotations

import io
from enum import Enum

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

from streaming.errors import UserError
from streaming.table.rows import table_schema

BLOCK_BYTES = 64 << 20


class ValueFormat(str, Enum):
    BINARY = "binary"
    STRING = "string"
    JSON = "json"


class ValueFormatError(UserError, ValueError):
    """Values the chosen --value-format cannot hold."""


def _new_type(fmt: ValueFormat, batches: list[pa.RecordBatch], where: str) -> pa.DataType:
    """The value column's type for an output that has none yet: for JSON, inferred from the values in
    ``batches`` (TABLE_SCHEMA rows; the caller makes sure there are some)."""
    if fmt is ValueFormat.BINARY:
        return pa.binary()
    if fmt is ValueFormat.STRING:
        return pa.string()
    return _parse_json(pa.concat_arrays([b.column("value").drop_null() for b in batches]), None, where).type


def format_of(kept: pa.DataType) -> ValueFormat:
    """The format whose values a kept column holds."""
    if pa.types.is_struct(kept):
        return ValueFormat.JSON
    return ValueFormat.STRING if pa.types.is_string(kept) or pa.types.is_large_string(kept) else ValueFormat.BINARY


def with_values(batch: pa.RecordBatch, value: pa.DataType, where: str) -> pa.RecordBatch:
    """The rows with their value column in the given type (tombstones' null stays null)."""
    raw = batch.column("value")
    fmt = format_of(value)
    if fmt is ValueFormat.BINARY:
        converted = raw.cast(value)
    elif fmt is ValueFormat.STRING:
        try:
            converted = raw.cast(value)
        except pa.ArrowInvalid:
            raise ValueFormatError(f"{where}: a value is not UTF-8 text; use --value-format binary") from None
    else:  # a tombstone parses as {} and is then masked to null
        parsed = _parse_json(pc.fill_null(raw, b"{}"), value, where)
        converted = pa.StructArray.from_arrays(parsed.flatten(), fields=list(value), mask=raw.is_null())
    schema = table_schema(value)
    return pa.RecordBatch.from_arrays([converted if f.name == "value" else batch.column(f.name) for f in schema],
                                      schema=schema)


def _parse_json(values: pa.Array, schema: pa.StructType | None, where: str) -> pa.StructArray:
    """One JSON object per value, in a struct column of ``schema`` (inferred when None)."""
    if not len(values):
        return pa.array([], schema)
    text = b"\n".join(v.strip().replace(b"\n", b" ") for v in values.to_pylist())
    options = pj.ParseOptions(explicit_schema=pa.schema(list(schema)) if schema is not None else None,
                              unexpected_field_behavior="ignore" if schema is not None else "infer")
    try:
        table = pj.read_json(io.BytesIO(text), pj.ReadOptions(block_size=BLOCK_BYTES), options)
    except pa.ArrowInvalid as exc:
        kept = "the schema kept from the first snapshot" if schema is not None else "one schema"
        raise ValueFormatError(f"{where}: the values are not JSON objects that fit {kept} ({exc}); use "
                               f"--value-format string or binary") from None
    if table.num_rows != len(values):
        raise ValueFormatError(f"{where}: {len(values)} values gave {table.num_rows} JSON objects: a value is "
                               f"empty or holds more than one; use --value-format string or binary")
    return pa.StructArray.from_arrays([c.combine_chunks() for c in table.columns], fields=list(table.schema))


class ValueColumn:
    """The value column across one snapshot: its type is fixed by the first partition that needs one (or by
    the output, ``kept``), so every partition's rows share a schema."""

    def __init__(self, fmt: ValueFormat, kept: pa.DataType | None = None, output: str = "") -> None:
        if kept is not None and format_of(kept) is not fmt:
            raise ValueFormatError(f"{output} holds values as {format_of(kept).value}, not {fmt.value}; keep "
                                   f"--value-format {format_of(kept).value} or write a new snapshot")
        self.fmt, self.type = fmt, kept

    def apply(self, batches: list[pa.RecordBatch], where: str) -> list[pa.RecordBatch]:
        """The rows (TABLE_SCHEMA) with their value in this column's type."""
        if self.type is None:
            if self.fmt is ValueFormat.JSON and not any(b.column("value").null_count < b.num_rows for b in batches):
                return []  # nothing to infer from, nothing to write
            self.type = _new_type(self.fmt, batches, where)
        return [with_values(b, self.type, where) for b in batches]
