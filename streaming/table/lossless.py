"""Values of a column's older type in its newer one, where nothing is lost: what ``--from-schema latest``
does to the rows a database changed the type of and a change stream still holds in the older type.

Text is made as PostgreSQL makes it when it converts a column (``ALTER COLUMN ... TYPE text``): a double as
its shortest exact digits (float8out), a boolean as true or false, a decimal as its exact digits. Anything
that could lose or change a value (text to a number, a timestamp's formatting, a narrowing) is refused, so
a table never holds a value the database would not give."""

from __future__ import annotations

from decimal import Decimal

import pyarrow as pa
import pyarrow.compute as pc

from streaming.table.connect_types import exact_text

class LossyChange(ValueError):
    """The older type's values cannot all be held by the newer type unchanged."""


def converted(array: pa.Array, kind: pa.DataType) -> pa.Array:
    """``array`` in ``kind``, or LossyChange naming why not."""
    have = array.type
    if have == kind:
        return array
    if pa.types.is_null(have):
        return pa.nulls(len(array), kind)
    if pa.types.is_string(kind):
        return _text(array)
    if not any(widening(have, kind) for widening in _WIDENINGS):
        raise LossyChange(f"{have} has no lossless conversion to {kind}")
    try:  # Arrow's safe cast refuses a value that would overflow, be rounded or be rescaled with loss
        return array.cast(kind)
    except pa.ArrowInvalid as exc:
        raise LossyChange(str(exc)) from None


_WIDENINGS = (
    lambda have, kind: pa.types.is_integer(have) and pa.types.is_integer(kind) and kind.bit_width >= have.bit_width,
    lambda have, kind: pa.types.is_floating(have) and pa.types.is_floating(kind) and kind.bit_width >= have.bit_width,
    lambda have, kind: pa.types.is_integer(have) and pa.types.is_floating(kind),
    lambda have, kind: (pa.types.is_integer(have) or pa.types.is_decimal(have)) and pa.types.is_decimal(kind),
)


def _text(array: pa.Array) -> pa.Array:
    have = array.type
    if pa.types.is_integer(have):
        return array.cast(pa.string())
    if pa.types.is_boolean(have):
        return pc.if_else(array, "true", "false")
    if pa.types.is_decimal(have):
        return exact_text(array)
    if pa.types.is_float64(have):
        return pa.array([None if v is None else float_text(v) for v in array.to_pylist()], pa.string())
    raise LossyChange(f"{have} has no text PostgreSQL and kcompact would write alike")


def float_text(value: float) -> str:
    """A double as PostgreSQL's float8out writes it: the shortest digits that read back exactly, in fixed
    notation for decimal exponents -4 to 14 and as d.ddde+XX otherwise."""
    if value != value:
        return "NaN"
    if value in (float("inf"), float("-inf")):
        return "Infinity" if value > 0 else "-Infinity"
    sign, digits, exponent = Decimal(repr(value)).as_tuple()
    text = "".join(map(str, digits)).rstrip("0") or "0"
    point = len(digits) + exponent  # digits before the decimal point
    lead = "-" if sign else ""
    if text == "0":
        return f"{lead}0"
    power = point - 1
    if -4 <= power < 15:
        if point <= 0:
            return f"{lead}0.{'0' * -point}{text}"
        if point >= len(text):
            return f"{lead}{text}{'0' * (point - len(text))}"
        return f"{lead}{text[:point]}.{text[point:]}"
    mantissa = text[0] + (f".{text[1:]}" if len(text) > 1 else "")
    return f"{lead}{mantissa}e{'-' if power < 0 else '+'}{abs(power):02d}"
