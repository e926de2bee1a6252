"""Kafka Connect schemas (as JsonConverter writes them with ``schemas.enable=true``) as Arrow types, and the
JSON values they describe as Arrow arrays, so a change stream's columns are typed as the database has them:
a Decimal is a decimal, Debezium's and Connect's time types are dates, times and timestamps.

Every column is nullable: a row written before a column was added reads it as null. Times and timestamps
are microseconds, the finest an Iceberg table (format 2) holds and PostgreSQL's own precision. int8 and int16
are widened to int32, which Iceberg has as its smallest integer.

Decimals are exact, built from the unscaled integers the source sends with integer arithmetic only: a
decimal.Decimal context rounds to 28 digits, which changed wide values and pushed a numeric(38,10) at its
maximum out of its type. A precision (or scale) over 38 is a decimal256, over 76 (past any Arrow decimal) the
exact text. Numeric without a scale (VariableScaleDecimal) is text too, written plain by decimal_text, as is
exact_text's for an output that holds no precision over 38.
"""

from __future__ import annotations

import base64
import binascii
import decimal
from typing import Any, Callable

import pyarrow as pa
import pyarrow.compute as pc

from streaming.errors import UserError

Converter = Callable[[list], pa.Array]
DECIMAL = "org.apache.kafka.connect.data.Decimal"
MAX_PRECISION = 38  # a Decimal without connect.decimal.precision; and the widest decimal128
MAX_PRECISION_256 = 76


class ConnectSchemaError(UserError, ValueError):
    """A value does not fit the Connect schema it came with."""


def _scaled(factor: int, target: pa.DataType) -> Converter:
    """Integers in some unit (days, ms, µs, ns) as ``target``, in microseconds where it is a time."""
    def convert(values: list) -> pa.Array:
        raw = pa.array(values, pa.int64())
        if factor > 0:
            raw = pc.multiply(raw, factor)
        elif factor < 0:
            raw = pc.divide(raw, -factor)
        return raw.cast(pa.int32() if pa.types.is_date32(target) else pa.int64()).cast(target)
    return convert


def _zoned(values: list) -> pa.Array:
    """ISO-8601 text with a zone (io.debezium.time.ZonedTimestamp) as a UTC timestamp."""
    return pa.array(values, pa.string()).cast(pa.timestamp("us", tz="UTC"))


def _base64(values: list) -> pa.Array:
    return pa.array([None if v is None else base64.b64decode(v) for v in values], pa.binary())


def decimal_text(unscaled: int, scale: int) -> str:
    """The exact plain text of ``unscaled`` * 10**-``scale``: never an exponent (Arrow's and Decimal's own
    text write 1E-20), and ``scale`` digits after the point as the source sent them (7206989.0)."""
    if scale <= 0:
        return str(unscaled * 10 ** -scale)
    digits = str(abs(unscaled)).rjust(scale + 1, "0")
    return f"{'-' if unscaled < 0 else ''}{digits[:-scale]}.{digits[-scale:]}"


def _unscaled(value: Any, scale: int) -> int:
    """A JSON number (decimal.format=NUMERIC) as the unscaled integer at ``scale``: a Decimal (the payload
    parsed with parse_float=Decimal) or an int exactly, a float as its shortest text."""
    if isinstance(value, int):
        sign, coefficient, exponent = value < 0, abs(value), 0
    else:
        number = value if isinstance(value, decimal.Decimal) else decimal.Decimal(repr(value))
        sign, digits, exponent = number.as_tuple()
        if not isinstance(exponent, int):
            raise ConnectSchemaError(f"{value} is not a number a decimal holds")
        coefficient = int("".join(map(str, digits)))
    shift = exponent + scale
    if shift >= 0:
        coefficient *= 10 ** shift
    else:
        coefficient, rest = divmod(coefficient, 10 ** -shift)
        if rest:
            raise ConnectSchemaError(f"{value} has more than {scale} digits after the point")
    return -coefficient if sign else coefficient


def _decimal(precision: int, scale: int) -> tuple[pa.DataType, Converter]:
    """A Connect Decimal of ``precision`` digits: a decimal128, a decimal256 past 38 digits, text past 76.
    PostgreSQL allows a scale past the digits (numeric(3,5)) and a negative one (numeric(5,-2)), which
    Parquet and Iceberg do not: the type takes as many digits as the scale (decimal(5,5)), or the scale 0
    and the digits the negative scale adds (decimal(7,0)), every value the same.
    The array is laid out from the unscaled integers themselves, so no value goes through a rounding step."""
    bound = 10 ** precision
    factor, kept_scale = (10 ** -scale, 0) if scale < 0 else (1, scale)

    def unscaled(v: Any) -> int:
        # decimal.format=BASE64 (the default): the unscaled value, big-endian two's complement
        u = int.from_bytes(binascii.a2b_base64(v), "big", signed=True) if isinstance(v, str) else _unscaled(v, scale)
        if not -bound < u < bound:
            raise ConnectSchemaError(f"{decimal_text(u, scale)} does not fit decimal({precision},{scale})")
        return u * factor

    digits = max(precision, scale) + (-scale if scale < 0 else 0)
    if digits > MAX_PRECISION_256:
        return pa.string(), lambda values: pa.array([None if v is None else decimal_text(unscaled(v), kept_scale)
                                                     for v in values], pa.string())
    kind = pa.decimal128(digits, kept_scale) if digits <= MAX_PRECISION else pa.decimal256(digits, kept_scale)
    width = kind.byte_width
    zero = bytes(width)

    def convert(values: list) -> pa.Array:
        integers = [None if v is None else unscaled(v) for v in values]
        data = b"".join(zero if u is None else u.to_bytes(width, "little", signed=True) for u in integers)
        validity = pa.array([u is not None for u in integers], pa.bool_()).buffers()[1] if None in integers else None
        return pa.Array.from_buffers(kind, len(integers), [validity, pa.py_buffer(data)])

    return kind, convert


def _variable_decimal(values: list) -> pa.Array:
    """io.debezium.data.VariableScaleDecimal (numeric without a scale): exact, as its plain decimal text."""
    return pa.array([None if v is None else
                     decimal_text(int.from_bytes(binascii.a2b_base64(v["value"]), "big", signed=True), int(v["scale"]))
                     for v in values], pa.string())


def exact_text(array: pa.Array | pa.ChunkedArray) -> pa.Array | pa.ChunkedArray:
    """A decimal128 or decimal256 column as its exact plain text (decimal_text), for an output that holds no
    precision over 38 (Iceberg, Spark); Arrow's own cast to string writes small values with an exponent."""
    if isinstance(array, pa.ChunkedArray):
        return pa.chunked_array([exact_text(chunk) for chunk in array.chunks], pa.string())
    width, scale = array.type.byte_width, array.type.scale
    data = array.buffers()[1].slice(array.offset * width, len(array) * width).to_pybytes()
    valid = array.is_valid().to_pylist() if array.null_count else [True] * len(array)
    return pa.array([decimal_text(int.from_bytes(data[i:i + width], "little", signed=True), scale) if ok else None
                     for i, ok in zip(range(0, len(data), width), valid, strict=True)], pa.string())


def _float(kind: pa.DataType) -> Converter:
    """A float column's converter. The payload may be parsed with parse_float=Decimal, whose values pa.array
    refuses for a float type: those are made floats, after pa.array refused them at the first one."""
    def convert(values: list) -> pa.Array:
        try:
            return pa.array(values, kind)
        except (pa.ArrowInvalid, pa.ArrowTypeError):
            return pa.array([float(v) if isinstance(v, decimal.Decimal) else v for v in values], kind)
    return convert


_LOGICAL: dict[str, tuple[pa.DataType, Converter]] = {
    "io.debezium.time.Date": (pa.date32(), _scaled(0, pa.date32())),
    "org.apache.kafka.connect.data.Date": (pa.date32(), _scaled(0, pa.date32())),
    "io.debezium.time.Time": (pa.time64("us"), _scaled(1000, pa.time64("us"))),
    "org.apache.kafka.connect.data.Time": (pa.time64("us"), _scaled(1000, pa.time64("us"))),
    "io.debezium.time.MicroTime": (pa.time64("us"), _scaled(0, pa.time64("us"))),
    "io.debezium.time.NanoTime": (pa.time64("us"), _scaled(-1000, pa.time64("us"))),
    "io.debezium.time.Timestamp": (pa.timestamp("us"), _scaled(1000, pa.timestamp("us"))),
    "org.apache.kafka.connect.data.Timestamp": (pa.timestamp("us"), _scaled(1000, pa.timestamp("us"))),
    "io.debezium.time.MicroTimestamp": (pa.timestamp("us"), _scaled(0, pa.timestamp("us"))),
    "io.debezium.time.NanoTimestamp": (pa.timestamp("us"), _scaled(-1000, pa.timestamp("us"))),
    "io.debezium.time.ZonedTimestamp": (pa.timestamp("us", tz="UTC"), _zoned),
    "io.debezium.data.VariableScaleDecimal": (pa.string(), _variable_decimal),
}

_PLAIN: dict[str, pa.DataType] = {
    "int8": pa.int32(), "int16": pa.int32(), "int32": pa.int32(), "int64": pa.int64(), "float": pa.float32(),
    "float32": pa.float32(), "double": pa.float64(), "float64": pa.float64(), "boolean": pa.bool_(),
    "string": pa.string(),
}


def field_type(schema: dict) -> tuple[pa.DataType, Converter]:
    """The Arrow type of a Connect schema, and the converter of its JSON values to an array of that type."""
    name, kind = schema.get("name"), schema.get("type")
    if name == DECIMAL:
        parameters = schema.get("parameters") or {}
        precision = int(parameters.get("connect.decimal.precision", MAX_PRECISION))
        return _decimal(precision, int(parameters.get("scale", 0)))
    if name in _LOGICAL:
        return _LOGICAL[name]
    if kind in _PLAIN:
        plain = _PLAIN[kind]
        return plain, _float(plain) if pa.types.is_floating(plain) else lambda values: pa.array(values, plain)
    if kind == "bytes":
        return pa.binary(), _base64
    if kind == "struct":
        return _struct(schema.get("fields") or [])
    if kind == "array":
        item, convert_item = field_type(schema["items"])
        return pa.list_(item), lambda values: _nested_list(values, item, convert_item)
    if kind == "map":
        key, convert_key = field_type(schema["keys"])
        value, convert_value = field_type(schema["values"])
        kind_ = pa.map_(key, value)
        return kind_, lambda values: _nested_map(values, kind_, convert_key, convert_value)
    raise ConnectSchemaError(f"a Connect schema of type {kind!r} is not one kcompact reads")


def _struct(fields: list[dict]) -> tuple[pa.DataType, Converter]:
    typed = [(f["field"], *field_type(f)) for f in fields]
    kind = pa.struct([pa.field(n, t) for n, t, _ in typed])

    def convert(values: list) -> pa.Array:
        mask = pa.array([v is None for v in values])
        children = [c([None if v is None else v.get(n) for v in values]) for n, _, c in typed]
        return pa.StructArray.from_arrays(children, fields=list(kind), mask=mask)
    return kind, convert


def _offsets(values: list) -> tuple[pa.Array, pa.Array]:
    """A list or map column's offsets into its flattened items, and its mask of null rows."""
    offsets, at = [0], 0
    for v in values:
        at += len(v) if v is not None else 0
        offsets.append(at)
    return pa.array(offsets, pa.int32()), pa.array([v is None for v in values])


def _nested_list(values: list, item: pa.DataType, convert_item: Converter) -> pa.Array:
    flat = [x for v in values if v is not None for x in v]
    offsets, mask = _offsets(values)
    return pa.ListArray.from_arrays(offsets, convert_item(flat), pa.list_(item), mask=mask)


def _nested_map(values: list, kind: pa.MapType, convert_key: Converter, convert_value: Converter) -> pa.Array:
    pairs = [list(v.items()) if isinstance(v, dict) else v for v in values]  # JsonConverter: an object or pairs
    keys = [k for p in pairs if p is not None for k, _ in p]
    items = [x for p in pairs if p is not None for _, x in p]
    offsets, mask = _offsets(pairs)
    return pa.MapArray.from_arrays(offsets, convert_key(keys), convert_value(items), kind, mask=mask)


def row_fields(schema: dict) -> list[tuple[str, pa.DataType, Converter]]:
    """A struct schema's fields (a table row's columns), each with its type and converter."""
    if schema.get("type") != "struct":
        raise ConnectSchemaError(f"a row's Connect schema is a {schema.get('type')!r}, not a struct")
    return [(f["field"], *field_type(f)) for f in schema.get("fields") or []]
