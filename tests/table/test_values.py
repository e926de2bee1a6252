"""The value column of a snapshot: bytes, text, or JSON objects as a struct whose schema the first partition
with values fixes and later ones grow; values it cannot hold are one line naming the partition."""

from __future__ import annotations

import pyarrow as pa
import pytest

from streaming.table.kafka_columns import HEADERS_TYPE
from streaming.table.rows import TABLE_SCHEMA
from streaming.table.evolution import SchemaChangeError
from streaming.table.values import TableShape, ValueFormat, ValueFormatError, ValueSpec


def _rows(*values: bytes | None) -> pa.RecordBatch:
    n = len(values)
    return pa.RecordBatch.from_arrays(
        [pa.array(["t"] * n), pa.array([0] * n, pa.int32()), pa.array(range(n), pa.int64()),
         pa.array([0] * n, pa.timestamp("us", tz="UTC")), pa.array([b"k%d" % i for i in range(n)]),
         pa.array(values, pa.binary()), pa.array([[]] * n, HEADERS_TYPE)], schema=TABLE_SCHEMA)


JSON = ValueSpec(ValueFormat.JSON)


def _values(batch: pa.RecordBatch) -> list:
    return batch.column("value").to_pylist()


def test_json_objects_become_a_struct_whose_schema_later_partitions_grow() -> None:
    shape = TableShape(JSON)
    assert shape.apply([_rows(None)], "t-0") == [] and shape.schema is None  # nothing to infer from yet
    first = shape.apply([_rows(b'{"a": 1, "b": "x"}', None)], "t-1")[0]
    assert _values(first) == [{"a": 1, "b": "x"}, None]
    later = shape.apply([_rows(b'{"a": 2, "c": true}')], "t-2")[0]
    assert _values(later) == [{"a": 2, "b": None, "c": True}]  # c is added to the schema, b is null here
    assert shape.schema.field("value").type == pa.struct([("a", pa.int64()), ("b", pa.string()), ("c", pa.bool_())])


def test_a_field_always_null_or_an_empty_struct_is_a_nullable_string_iceberg_can_hold() -> None:
    shape = TableShape(JSON)
    rows = shape.apply([_rows(b'{"a": 1, "before": null, "empty": {}}')], "t-0")[0]
    assert shape.schema.field("value").type == pa.struct([("a", pa.int64()), ("before", pa.string()),
                                                          ("empty", pa.string())])
    assert _values(rows) == [{"a": 1, "before": None, "empty": None}]


def test_a_field_whose_type_changed_is_one_line_naming_the_column_and_the_output() -> None:
    shape = TableShape(JSON, None, "out")
    shape.apply([_rows(b'{"a": 1}')], "t-0")
    with pytest.raises(SchemaChangeError, match="^column a of out is int64, and the source now gives string"):
        shape.apply([_rows(b'{"a": "one"}')], "t-1")


@pytest.mark.parametrize("value,words", [(b"[1, 2]", "not JSON objects of one schema"),
                                         (b"", "2 values gave 1 JSON objects"),
                                         (b"null", "a value is JSON null, not an object"),
                                         (b'{"a": 1} {"a": 2}', "2 values gave 3 JSON objects")])
def test_a_value_that_is_not_one_json_object_is_refused_naming_the_partition(value, words) -> None:
    with pytest.raises(ValueFormatError, match=f"^t-3: .*{words}"):
        TableShape(JSON).apply([_rows(b'{"a": 1}', value)], "t-3")


def test_a_json_null_is_a_delete_when_asked() -> None:
    shape = TableShape(ValueSpec(ValueFormat.JSON, null_deletes=True))
    rows = shape.apply([_rows(b'{"a": 1}', b"null")], "t-0")[0]
    assert _values(rows) == [{"a": 1}] and rows.column("key").to_pylist() == [b"k0"]


def test_text_must_be_utf8_and_an_output_keeps_its_format() -> None:
    assert _values(TableShape(ValueSpec(ValueFormat.STRING)).apply([_rows(b"caf\xc3\xa9")], "t-0")[0]) == ["café"]
    with pytest.raises(ValueFormatError, match="^t-0: a value is not UTF-8 text"):
        TableShape(ValueSpec(ValueFormat.STRING)).apply([_rows(b"\xff")], "t-0")
    with pytest.raises(ValueFormatError, match="out holds values as string, not json"):
        TableShape(JSON, TABLE_SCHEMA.set(5, pa.field("value", pa.large_string())), "out")


def test_the_formats_are_the_run_options_choices() -> None:
    from streaming.configuration.settings import RUN_OPTIONS

    assert tuple(f.value for f in ValueFormat) == RUN_OPTIONS["snapshot.value.format"].choices
