"""Kafka Connect decimals are exact: the unscaled integer the source sends is the value, at any number of
digits. A Decimal is a decimal128 up to 38 digits, a decimal256 up to 76 and its plain text past that; numeric
without a scale (VariableScaleDecimal) is its plain text. The oracle here is Python's Decimal built from the
digits themselves (no context, so no rounding) and its "f" format."""

from __future__ import annotations

import base64
import json
from decimal import Decimal

import hypothesis.strategies as st
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings

from streaming.table.connect_types import ConnectSchemaError, decimal_text, exact_text, field_type

LIMIT = 10 ** 76
VARIABLE = {"type": "struct", "name": "io.debezium.data.VariableScaleDecimal",
            "fields": [{"type": "int32", "field": "scale"}, {"type": "bytes", "field": "value"}]}


def decimal_schema(scale: int, precision: int | None = None) -> dict:
    parameters = {"scale": str(scale)}
    if precision is not None:
        parameters["connect.decimal.precision"] = str(precision)
    return {"type": "bytes", "name": "org.apache.kafka.connect.data.Decimal", "parameters": parameters}


def b64(unscaled: int) -> str:
    """The unscaled integer as Connect's BASE64 form: big-endian two's complement."""
    return base64.b64encode(unscaled.to_bytes((unscaled.bit_length() + 8) // 8, "big", signed=True)).decode()


def exact(unscaled: int, scale: int) -> Decimal:
    return Decimal((int(unscaled < 0), tuple(int(d) for d in str(abs(unscaled))), -scale))


def as_json_number(unscaled: int, scale: int) -> Decimal:
    """The value as json's parse_float=Decimal gives it from the shortest JSON text: trailing fractional
    zeros left off (1.5 for a scale-3 column's 1.500)."""
    digits = str(abs(unscaled))
    dropped = min(len(digits) - len(digits.rstrip("0")), scale) if unscaled else scale
    kept = digits[:len(digits) - dropped] or "0"
    return Decimal((int(unscaled < 0), tuple(int(d) for d in kept), dropped - scale))


@st.composite
def decimals(draw: st.DrawFn, widest: int = 76) -> tuple[int, int, int]:
    """An unscaled integer, a scale, and a precision that holds it (past 76: one only text holds)."""
    unscaled = draw(st.integers(-LIMIT + 1, LIMIT - 1) | st.integers(-10 ** 20, 10 ** 20))
    precision = draw(st.integers(max(len(str(abs(unscaled))), 1), widest) | st.integers(77, 100))
    return unscaled, draw(st.integers(0, 40)), precision


def arrow_type(precision: int, scale: int) -> pa.DataType:
    """The narrowest Arrow type Parquet and Iceberg take holding both the digits and the scale: no scale past
    the digits, none below 0."""
    digits = max(precision, scale) + max(-scale, 0)
    scale = max(scale, 0)
    return (pa.decimal128(digits, scale) if digits <= 38 else
            pa.decimal256(digits, scale) if digits <= 76 else pa.string())


def check(array: pa.Array, unscaled: int, scale: int, precision: int) -> None:
    assert array.type == arrow_type(precision, scale)
    if array.type == pa.string():
        assert array.to_pylist() == [format(exact(unscaled, scale), "f")]
    else:
        assert array.to_pylist() == [exact(unscaled, scale)]
        assert exact_text(array).to_pylist() == [format(exact(unscaled, scale), "f")]


@settings(max_examples=300, deadline=None)
@given(decimals())
def test_a_decimal_of_any_digits_is_exact_through_base64(drawn: tuple[int, int, int]) -> None:
    unscaled, scale, precision = drawn
    kind, convert = field_type(decimal_schema(scale, precision))
    assert kind == arrow_type(precision, scale)
    check(convert([b64(unscaled)]), unscaled, scale, precision)


@settings(max_examples=300, deadline=None)
@given(decimals())
def test_a_decimal_of_any_digits_is_exact_as_a_json_number(drawn: tuple[int, int, int]) -> None:
    unscaled, scale, precision = drawn
    number = as_json_number(unscaled, scale)
    assert json.loads(str(number), parse_float=Decimal) == number  # what the payload's parser hands over
    check(field_type(decimal_schema(scale, precision))[1]([number]), unscaled, scale, precision)


@settings(max_examples=300, deadline=None)
@given(decimals())
def test_a_numeric_without_scale_is_its_exact_plain_text(drawn: tuple[int, int, int]) -> None:
    unscaled, scale, _ = drawn
    kind, convert = field_type(VARIABLE)
    assert kind == pa.string()
    text = convert([{"scale": scale, "value": b64(unscaled)}]).to_pylist()[0]
    assert text == format(exact(unscaled, scale), "f") == decimal_text(unscaled, scale)
    assert "E" not in text and (scale == 0 or len(text.partition(".")[2]) == scale)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.none() | st.integers(-LIMIT + 1, LIMIT - 1), min_size=1, max_size=8), st.integers(0, 40),
       st.integers(0, 3))
def test_exact_text_of_a_decimal256_slice_is_its_plain_text_with_nulls_kept(values: list[int | None], scale: int,
                                                                              offset: int) -> None:
    array = field_type(decimal_schema(scale, 76))[1]([None if u is None else b64(u) for u in values])
    assert array.type == pa.decimal256(76, scale)
    assert exact_text(array.slice(offset)).to_pylist() == [None if u is None else format(exact(u, scale), "f")
                                                           for u in values[offset:]]


@pytest.mark.parametrize("unscaled,scale,text", [
    (72069890, 1, "7206989.0"), (1, 20, "0.00000000000000000001"), (-5, 3, "-0.005"), (123, 0, "123"),
    (0, 2, "0.00"), (-1234, 2, "-12.34"), (12, -3, "12000"), (-12, -1, "-120"),
])
def test_decimal_text_is_plain_with_the_scales_digits_kept(unscaled: int, scale: int, text: str) -> None:
    assert decimal_text(unscaled, scale) == text


def test_the_reported_wide_numerics_are_exact() -> None:
    convert = field_type(VARIABLE)[1]
    assert convert([{"scale": 9, "value": b64(123456789012345678901234567890123456789)}]).to_pylist() == [
        "123456789012345678901234567890.123456789"]
    assert convert([{"scale": 0, "value": b64(10 ** 41 - 1)}]).to_pylist() == ["9" * 41]
    assert convert([{"scale": 1, "value": b64(72069890)}, {"scale": 20, "value": b64(1)}]).to_pylist() == [
        "7206989.0", "0.00000000000000000001"]
    wide = field_type(decimal_schema(0, 41))[1]([b64(10 ** 41 - 1)])
    assert wide.type == pa.decimal256(41, 0) and wide.to_pylist() == [Decimal("9" * 41)]


def test_a_numeric_38_10_at_its_maximum_fits_decimal128_38_10() -> None:
    kind, convert = field_type(decimal_schema(10, 38))
    maximum = Decimal("9999999999999999999999999999.9999999999")
    for value in (b64(10 ** 38 - 1), maximum):
        array = convert([value])
        assert kind == array.type == pa.decimal128(38, 10)
        assert array.to_pylist() == [maximum]


@pytest.mark.parametrize("precision", [12, 50, 80])
def test_a_null_among_decimals_stays_null(precision: int) -> None:
    array = field_type(decimal_schema(2, precision))[1]([b64(-1234), None, Decimal("5.6"), None])
    expected = [Decimal("-12.34"), None, Decimal("5.60"), None]
    assert array.to_pylist() == (expected if precision <= 76 else ["-12.34", None, "5.60", None])
    assert field_type(VARIABLE)[1]([None, {"scale": 2, "value": b64(-1234)}]).to_pylist() == [None, "-12.34"]


@pytest.mark.parametrize("value", [b64(10 ** 12), b64(-10 ** 12), Decimal("10000000000.00"), 10 ** 10])
def test_a_value_over_its_precision_is_refused_naming_the_value_and_the_type(value: str | Decimal | int) -> None:
    with pytest.raises(ConnectSchemaError, match=r"^-?10000000000\.00 does not fit decimal\(12,2\)$"):
        field_type(decimal_schema(2, 12))[1]([value])


def test_a_json_number_with_more_digits_than_the_scale_is_refused() -> None:
    with pytest.raises(ConnectSchemaError, match=r"^1\.234 has more than 2 digits after the point$"):
        field_type(decimal_schema(2, 12))[1]([Decimal("1.234")])


@pytest.mark.parametrize("scale,kind", [(38, pa.decimal128(38, 38)), (39, pa.decimal256(39, 39)),
                                        (-2, pa.decimal128(7, 0)), (-71, pa.decimal256(76, 0)), (77, pa.string())])
def test_a_scale_past_the_digits_or_below_zero_takes_a_type_parquet_holds(scale: int, kind: pa.DataType) -> None:
    array = field_type(decimal_schema(scale, 5))[1]([b64(-12345)])
    assert array.type == kind
    assert (exact_text(array) if kind != pa.string() else array).to_pylist() == [decimal_text(-12345, scale)]
    if kind != pa.string():
        pq.write_table(pa.table({"d": array}), pa.BufferOutputStream())


def test_a_decimal_without_a_precision_is_a_decimal128_of_38() -> None:
    kind, convert = field_type(decimal_schema(3))
    assert kind == pa.decimal128(38, 3)
    assert convert([b64(-5), 7]).to_pylist() == [Decimal("-0.005"), Decimal("7.000")]


def test_a_float_column_takes_json_numbers_parsed_as_decimal() -> None:
    for name, kind in (("double", pa.float64()), ("float", pa.float32())):
        array = field_type({"type": name})[1]([Decimal("1.5"), None, 2, 0.25])
        assert array.type == kind and array.to_pylist() == [1.5, None, 2.0, 0.25]
