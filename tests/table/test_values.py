"""The value column of a snapshot: bytes, text, or JSON objects as a struct whose schema the first partition
with values fixes; values it cannot hold are one line naming the partition."""

from __future__ import annotations

import pyarrow as pa
import pytest

from streaming.table.kafka_columns import HEADERS_TYPE
from streaming.table.rows import TABLE_SCHEMA
from streaming.table.values import ValueColumn, ValueFormat, ValueFormatError


def _rows(*values: bytes | None) -> pa.RecordBatch:
    n = len(values)
    return pa.RecordBatch.from_arrays(
        [pa.array(["t"] * n), pa.array([0] * n, pa.int32()), pa.array(range(n), pa.int64()),
         pa.array([0] * n, pa.timestamp("us", tz="UTC")), pa.array([b"k%d" % i for i in range(n)]),
         pa.array(values, pa.binary()), pa.array([[]] * n, HEADERS_TYPE)], schema=TABLE_SCHEMA)


def test_json_objects_become_a_struct_whose_schema_later_partitions_keep() -> None:
    column = ValueColumn(ValueFormat.JSON)
    assert column.apply([_rows(None)], "t-0") == [] and column.type is None  # nothing to infer from yet
    first = column.apply([_rows(b'{"a": 1, "b": "x"}', None)], "t-1")[0]
    assert first.column("value").to_pylist() == [{"a": 1, "b": "x"}, None]
    later = column.apply([_rows(b'{"a": 2, "c": true}')], "t-2")[0]
    assert later.column("value").to_pylist() == [{"a": 2, "b": None}]  # c is not in the kept schema


@pytest.mark.parametrize("value,words", [(b'{"a": "one"}', "not JSON objects that fit the schema kept"),
                                         (b"[1, 2]", "not JSON objects that fit"),
                                         (b"", "not JSON objects that fit"),
                                         (b'{"a": 1} {"a": 2}', "1 values gave 2 JSON objects")])
def test_a_value_the_kept_schema_cannot_hold_is_refused_naming_the_partition(value, words) -> None:
    column = ValueColumn(ValueFormat.JSON, pa.struct([("a", pa.int64())]))
    with pytest.raises(ValueFormatError, match=f"^t-3: .*{words}"):
        column.apply([_rows(value)], "t-3")


def test_text_must_be_utf8_and_an_output_keeps_its_format() -> None:
    assert ValueColumn(ValueFormat.STRING).apply([_rows(b"caf\xc3\xa9")], "t-0")[0].column("value").to_pylist() == ["café"]
    with pytest.raises(ValueFormatError, match="^t-0: a value is not UTF-8 text"):
        ValueColumn(ValueFormat.STRING).apply([_rows(b"\xff")], "t-0")
    with pytest.raises(ValueFormatError, match="out holds values as string, not json"):
        ValueColumn(ValueFormat.JSON, pa.large_string(), "out")


def test_the_formats_are_the_run_options_choices() -> None:
    from streaming.configuration.settings import RUN_OPTIONS

    assert tuple(f.value for f in ValueFormat) == RUN_OPTIONS["snapshot.value.format"].choices
