"""A table's schema as its source changes: a column added at the source is added to the output (rows written
before read it as null, or as the column's default: streaming.table.column_defaults), an integer or float
column may widen (int32 to int64, float to double, as Iceberg allows), and any other change of type stops
the output in one line naming the column and the way out, so a column never changes type under its readers.

Shapes Iceberg cannot hold are made nullable columns it can: a field that was always null (Arrow's null
type) and a struct with no fields become strings, which a later snapshot fills if values ever come.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from streaming.errors import UserError
from streaming.table.column_defaults import earliest, filled
from streaming.table.lossless import LossyChange, converted
from streaming.table.rows import CHANGE_COLUMNS

CHANGED_AT = CHANGE_COLUMNS.timestamp  # a change stream's row's record time
NEW_OUTPUT = ("a type change an output cannot take; write a new output (another --output or --iceberg-table) to "
              "start from the new type")
# a change stream's way out of a type change: every row in the newest schema, in an output of its own
WAY_OUT = ("a type change an output cannot take in place; write a new output from the newest schema, with "
           "`kcompact snapshot --value-format debezium --from-schema latest` (or `run --snapshot-from-schema "
           "latest`) to another --output or --iceberg-table")
_WIDENS = {(pa.int32(), pa.int64()), (pa.float32(), pa.float64())}


class SchemaChangeError(UserError, ValueError):
    """A column's type changed at the source in a way the output cannot take."""


def storable(kind: pa.DataType) -> pa.DataType:
    """``kind`` with every null or empty-struct type, however deep, made a string."""
    if pa.types.is_null(kind) or (pa.types.is_struct(kind) and kind.num_fields == 0):
        return pa.string()
    if pa.types.is_struct(kind):
        return pa.struct([pa.field(f.name, storable(f.type)) for f in kind])
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        return pa.list_(storable(kind.value_type))
    return kind


def widens(narrow: pa.DataType, wide: pa.DataType) -> bool:
    return (narrow, wide) in _WIDENS


def merged(kept: pa.Schema, new: pa.Schema, output: str, way_out: str = NEW_OUTPUT) -> pa.Schema:
    """``kept`` with ``new``'s columns it lacks added at the end, and columns widened where ``new`` is wider;
    a column's default (streaming.table.column_defaults) comes with it."""
    if kept.equals(new, check_metadata=True):  # the common case: a partition's batches of one schema
        return kept
    fields = {f.name: f for f in kept}
    for f in new:
        if f.name in fields:
            had = fields[f.name]
            fields[f.name] = pa.field(f.name, _merged_type(had.type, f.type, f.name, output, way_out),
                                      metadata=earliest(had, f))
        else:
            fields[f.name] = f
    return pa.schema(list(fields.values()), metadata=kept.metadata)


def _merged_type(kept: pa.DataType, new: pa.DataType, column: str, output: str, way_out: str = NEW_OUTPUT) -> pa.DataType:
    if pa.types.is_null(new):  # always null so far: no type to hold to
        return kept
    if pa.types.is_null(kept):
        return new
    if kept == new or (kept, new) in {(w, n) for n, w in _WIDENS}:
        return kept
    if (kept, new) in _WIDENS:
        return new
    if pa.types.is_struct(kept) and pa.types.is_struct(new):
        inner = merged(pa.schema(list(kept)), pa.schema(list(new)), output, way_out)
        return pa.struct([pa.field(f.name, f.type) for f in inner])
    if pa.types.is_list(kept) and pa.types.is_list(new):
        return pa.list_(_merged_type(kept.value_type, new.value_type, f"{column}[]", output, way_out))
    raise SchemaChangeError(f"column {column} of {output} is {kept}, and the source now gives {new}: "
                            f"{way_out}")


def conformed(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    """The batch in ``schema``: columns it lacks take their default (or null), narrower ones widened, and
    ones of an older type converted without loss (``schema`` is a merge of the batch's own, or the newest)."""
    names = batch.schema.names
    times = pc.divide(batch.column(CHANGED_AT).cast(pa.int64()), 1000) if CHANGED_AT in names else None
    columns = [_conformed(batch.column(f.name), f.type, f.name) if f.name in names else filled(f, batch.num_rows, times)
               for f in schema]
    return pa.RecordBatch.from_arrays(columns, schema=schema)


def _conformed(array: pa.Array, kind: pa.DataType, column: str) -> pa.Array:
    if array.type == kind:
        return array
    if storable(array.type) != array.type and not pa.types.is_struct(kind):  # nothing in it to keep
        return pa.nulls(len(array), kind)
    if pa.types.is_struct(kind) and pa.types.is_struct(array.type):
        given = dict(zip([f.name for f in array.type], array.flatten(), strict=True))
        children = [_conformed(given[f.name], f.type, f"{column}.{f.name}") if f.name in given
                    else pa.nulls(len(array), f.type)
                    for f in kind]
        return pa.StructArray.from_arrays(children, fields=list(kind), mask=array.is_null())
    if pa.types.is_nested(kind):
        return array.cast(kind)
    try:
        return converted(array, kind)
    except LossyChange as exc:
        raise SchemaChangeError(f"column {column} is {array.type} in rows the output holds, and cannot be held as "
                                f"{kind}: {exc}") from None
