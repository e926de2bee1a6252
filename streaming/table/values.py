"""The rows of a snapshot in the output's columns: the value as bytes, UTF-8 text, JSON objects expanded into
a struct column (``value.amount`` in SQL), or a Debezium change stream as the database table's own typed
columns (streaming.table.debezium).

A JSON or Debezium schema is inferred by the first snapshot and kept by the output (a Parquet file's schema,
an Iceberg table's), then evolved: a field or column that appears later is added, and one whose type changed
is refused (streaming.table.evolution), so a column never changes type under its readers.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from enum import Enum

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

from streaming.errors import UserError
from streaming.table.debezium import ChangeEvents
from streaming.table.connect_types import MAX_PRECISION_256, exact_text
from streaming.table.evolution import NEW_OUTPUT, WAY_OUT, conformed, merged, storable
from streaming.table.rows import CHANGE_COLUMNS, KAFKA_COLUMNS, TABLE_SCHEMA, Coordinates, change_rows, table_schema

BLOCK_BYTES = 64 << 20
JSON_NULL = b"null"


class FromSchema(str, Enum):
    """Which Connect schema a change stream's rows are read in: every version's columns (a type may only
    widen), or the newest one's, older rows converted without loss: the way out of a type change."""

    ALL = "all"
    LATEST = "latest"


class ValueFormat(str, Enum):
    BINARY = "binary"
    STRING = "string"
    JSON = "json"
    DEBEZIUM = "debezium"


@dataclass(frozen=True)
class ValueSpec:
    """How a snapshot reads values: the format, and whether a JSON ``null`` value is a delete of its key (as
    Debezium's ExtractNewRecordState writes one) rather than an error."""

    format: ValueFormat = ValueFormat.BINARY
    null_deletes: bool = False
    from_schema: FromSchema = FromSchema.ALL

    def __post_init__(self) -> None:
        if self.from_schema is FromSchema.LATEST and self.format is not ValueFormat.DEBEZIUM:
            raise ValueFormatError("--from-schema latest reads a change stream's Connect schemas: it goes with "
                                   "--value-format debezium")

    @property
    def columns_from_values(self) -> bool:
        """Whether the values give the table its columns, so two topics' tables differ."""
        return self.format in (ValueFormat.JSON, ValueFormat.DEBEZIUM)

    @property
    def coordinates(self) -> Coordinates:
        """The names of the columns that place a row (its partition, key and offset) in this format's table."""
        return CHANGE_COLUMNS if self.format is ValueFormat.DEBEZIUM else KAFKA_COLUMNS


class ValueFormatError(UserError, ValueError):
    """Values the chosen --value-format cannot hold."""


def format_of(kept: pa.Schema) -> ValueFormat:
    """The format whose rows an output's schema holds."""
    if CHANGE_COLUMNS.key in kept.names:
        return ValueFormat.DEBEZIUM
    value = kept.field("value").type
    if pa.types.is_struct(value):
        return ValueFormat.JSON
    return ValueFormat.STRING if pa.types.is_string(value) or pa.types.is_large_string(value) else ValueFormat.BINARY


def _with_value(batch: pa.RecordBatch, value: pa.Array) -> pa.RecordBatch:
    schema = table_schema(value.type)
    return pa.RecordBatch.from_arrays([value if f.name == "value" else batch.column(f.name) for f in schema],
                                      schema=schema)


def _too_wide(kind: pa.DataType, widest: int) -> bool:
    return pa.types.is_decimal(kind) and kind.precision > widest


def _within(batch: pa.RecordBatch, widest: int) -> pa.RecordBatch:
    """The batch with each decimal column wider than the output holds as its exact text."""
    for i, f in enumerate(batch.schema):
        if _too_wide(f.type, widest):
            batch = batch.set_column(i, f.with_type(pa.string()), exact_text(batch.column(i)))
    return batch


def _parse_json(values: pa.Array, where: str) -> pa.StructArray:
    """One JSON object per value, in a struct column of the inferred schema."""
    if not len(values):
        return pa.array([], pa.struct([]))
    text = b"\n".join(v.strip().replace(b"\n", b" ") for v in values.to_pylist())
    try:
        table = pj.read_json(io.BytesIO(text), pj.ReadOptions(block_size=BLOCK_BYTES))
    except pa.ArrowInvalid as exc:
        raise ValueFormatError(f"{where}: the values are not JSON objects of one schema ({exc}); use "
                               f"--value-format string or binary") from None
    if table.num_rows != len(values):
        raise ValueFormatError(f"{where}: {len(values)} values gave {table.num_rows} JSON objects: a value is "
                               f"empty or holds more than one; use --value-format string or binary")
    return pa.StructArray.from_arrays([c.combine_chunks() for c in table.columns], fields=list(table.schema))


class TableShape:
    """The output's schema across one snapshot: fixed by the output when it has one (``kept``), else by the
    first partition with rows, and grown by later partitions' new fields, so every partition's rows share
    it. With --from-schema latest, the newest Connect schema's (``learn`` sees the changed partitions first, ``seed`` the rest), and
    the output's own is left to follow it.

    ``widest_decimal``: the most digits the output holds in a decimal (Iceberg and Spark: 38); a wider one is
    its exact text there."""

    def __init__(self, spec: ValueSpec, kept: pa.Schema | None = None, output: str = "",
                 widest_decimal: int = MAX_PRECISION_256) -> None:
        if kept is not None and format_of(kept) is not spec.format:
            had = format_of(kept).value
            raise ValueFormatError(f"{output} holds values as {had}, not {spec.format.value}; keep "
                                   f"--value-format {had} or write a new snapshot")
        self.spec, self.output, self.widest_decimal = spec, output, widest_decimal
        self.schema = None if self.latest else kept
        self._events = ChangeEvents(spec.null_deletes)
        self._topics: set[str] = set()

    @property
    def latest(self) -> bool:
        return self.spec.from_schema is FromSchema.LATEST

    def learn(self, batches: list[pa.RecordBatch], where: str) -> None:
        """With --from-schema latest, a partition's records before any is read: the newest schema is known
        before the first row is made. It is one topic's: two topics' tables are not one schema's versions."""
        for b in batches:
            self._topics.update(b.column("topic").unique().to_pylist())
            if len(self._topics) > 1:
                raise ValueFormatError(f"{self.output}: --from-schema latest reads one topic's newest schema, and "
                                       f"this output takes {len(self._topics)} topics; give each an output of its "
                                       f"own ({{table}} or {{topic}} in the name) or one --topic")
            self._events.learn(b.column("value").to_pylist(), b.column("timestamp").cast(pa.int64()).to_pylist(),
                               where)

    @property
    def newest_mark(self) -> tuple[int, str] | None:
        """With --from-schema latest: the newest schema learned, for the output to keep."""
        return self._events.newest_mark if self.latest else None

    def seed(self, mark: tuple[int, str] | None) -> None:
        """The newest schema the output kept from its last snapshot: only the partitions that changed since
        need to be learned from, as no older one can hold a newer record."""
        if self.latest and mark is not None:
            self._events.seed(mark, self.output)

    def _newest_schema(self) -> pa.Schema | None:
        """The output's columns from the newest schema alone, before any row: a partition left with no live
        rows still has its table's columns, and its rows are deleted from the output."""
        fields = self._events.newest_fields()
        if fields is None:
            return None
        placing = [pa.field(name, TABLE_SCHEMA.field(getattr(KAFKA_COLUMNS, attr)).type)
                   for attr, name in vars(CHANGE_COLUMNS).items()]
        return pa.schema(placing + [f.with_type(pa.string()) if _too_wide(f.type, self.widest_decimal) else f
                                    for f in fields])

    def apply(self, batches: list[pa.RecordBatch], where: str) -> list[pa.RecordBatch]:
        """The rows (TABLE_SCHEMA, values as stored) in the output's columns; the schema grows first when
        they bring new ones. A partition with nothing to infer from, before any schema, gives no rows."""
        rows = [_within(r, self.widest_decimal) for r in (self._rows(b, where) for b in batches) if r is not None]
        way_out = WAY_OUT if self.spec.format is ValueFormat.DEBEZIUM else NEW_OUTPUT
        if self.latest and self.schema is None:
            self.schema = self._newest_schema()
        for r in rows:
            self.schema = r.schema if self.schema is None else merged(self.schema, r.schema, self.output, way_out)
        if self.schema is None:
            return []
        self.schema = pa.schema([f.with_type(storable(f.type)) for f in self.schema], metadata=self.schema.metadata)
        return [conformed(r, self.schema) for r in rows]

    def _rows(self, batch: pa.RecordBatch, where: str) -> pa.RecordBatch | None:
        fmt, raw = self.spec.format, batch.column("value")
        if fmt is ValueFormat.BINARY:
            return _with_value(batch, raw)
        if fmt is ValueFormat.STRING:
            try:
                return _with_value(batch, raw.cast(pa.string()))
            except pa.ArrowInvalid:
                raise ValueFormatError(f"{where}: a value is not UTF-8 text; use --value-format binary") from None
        batch = self._without_json_nulls(batch, where)
        if fmt is ValueFormat.DEBEZIUM:
            live = batch.filter(batch.column("value").is_valid())
            millis = pc.divide(live.column("timestamp").cast(pa.int64()), 1000).to_pylist()
            columns, kept = self._events.rows(live.column("value").to_pylist(), live.column("key").to_pylist(), where,
                                              millis)
            return change_rows(live.take(pa.array(kept, pa.int64())), columns) if kept else None
        raw = batch.column("value")
        present = raw.drop_null()
        if not len(present):
            return None if self.schema is None else _with_value(batch, pa.nulls(len(raw), self.schema.field("value").type))
        parsed = _parse_json(pc.fill_null(raw, b"{}"), where)  # a tombstone parses as {} and is masked to null
        return _with_value(batch, pa.StructArray.from_arrays(parsed.flatten(), fields=list(parsed.type),
                                                              mask=raw.is_null()))

    def _without_json_nulls(self, batch: pa.RecordBatch, where: str) -> pa.RecordBatch:
        """A value that is JSON ``null`` is a delete when the spec says so (its key has no row), else refused."""
        nulls = pc.equal(batch.column("value"), pa.scalar(JSON_NULL, pa.binary()))
        if not pc.any(nulls).as_py():
            return batch
        if self.spec.null_deletes:
            return batch.filter(pc.invert(pc.fill_null(nulls, False)))
        raise ValueFormatError(f"{where}: a value is JSON null, not an object (Debezium's ExtractNewRecordState "
                               f"writes a delete so): give --json-null-deletes to read it as a delete of its key")
