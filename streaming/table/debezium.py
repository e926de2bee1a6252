"""Debezium change events as table rows: the row is the envelope's ``after`` (or the whole value, in the
flattened form ExtractNewRecordState writes), a delete removes the key, and columns are typed from the
Connect schema each message carries when JsonConverter has ``schemas.enable=true`` (streaming.table.
connect_types); without one, types are inferred from the values.

A key's winner is a delete when it is an envelope with ``op`` "d", a flattened value whose ``__deleted`` is
true (``delete.tombstone.handling.mode=rewrite``), or, when asked (``null_deletes``), a JSON ``null`` (what
ExtractNewRecordState's default writes for a delete). A tombstone never reaches here: it has no live row.
Fields the flattening adds (``__op``, ``__table``, ``__deleted``...) are not columns of the table, nor is
any other field named so: the table's own placing columns are (streaming.table.rows.CHANGE_COLUMNS).
"""

from __future__ import annotations

import decimal
import json
from dataclasses import dataclass, field
from functools import cached_property
from typing import Iterable

import pyarrow as pa
import pyarrow.compute as pc

from streaming.table.column_defaults import default_text, filled, with_default
from streaming.table.connect_types import DECIMAL, ConnectSchemaError, Converter, row_fields
from streaming.table.evolution import WAY_OUT, SchemaChangeError, storable, widens
from streaming.table.lossless import LossyChange, converted

PAYLOAD = b',"payload":'
SCHEMA_OPEN = b'{"schema":'
ADDED = "__"  # ExtractNewRecordState's prefix for the fields it adds


class ChangeEventError(ConnectSchemaError):
    """A value that is not a Debezium change event."""


@dataclass(frozen=True)
class _Column:
    """A column of a row schema: its type, the converter of its JSON values, and its Connect schema (which
    holds its default)."""

    name: str
    kind: pa.DataType
    convert: Converter
    connect: dict

    @cached_property
    def default(self) -> bytes:
        return default_text(self.connect)


@dataclass(frozen=True)
class _RowSchema:
    """A value's Connect schema, decoded: the row's typed columns (None: the schema is null), and whether it
    is an envelope's."""

    key: bytes
    columns: dict[str, _Column] | None
    envelope: bool
    decimals: tuple[str, ...] = ()  # its Decimal columns: their JSON numbers are parsed exactly


@dataclass
class _Decoded:
    """One partition's live rows, each with the Connect schema it came with (None: schemaless)."""

    rows: list[dict] = field(default_factory=list)
    kept: list[int] = field(default_factory=list)  # each row's index in the partition's records
    schemas: list[_RowSchema | None] = field(default_factory=list)
    timestamps_ms: list[int] | None = None  # each row's record time, where known


class ChangeEvents:
    """The decoder of one snapshot, which keeps each distinct Connect schema decoded once: a message carries
    its schema whole, and a table's messages share a few.

    Rows are read in the columns of every schema version their records came with (a column added later is
    null, or its default, in the older rows; a type may only widen), or, once ``learn`` has seen the
    records, in the newest schema's columns alone, older rows' values converted where nothing is lost
    (``--from-schema latest``: the way out of a type change)."""

    def __init__(self, null_deletes: bool) -> None:
        self.null_deletes = null_deletes
        self._schemas: dict[bytes, _RowSchema] = {}
        self._newest: tuple[int, _RowSchema] | None = None  # the newest record's schema, by its timestamp
        self._numbers: dict[bytes, bool] = {}  # per schema: whether its decimals come as JSON numbers

    def learn(self, values: list[bytes | None], timestamps: list[int], where: str) -> None:
        """Note the newest schema among these records (a partition's, all of them, deletes too: a delete
        is written under the table's schema of its time)."""
        for raw, ts in zip(values, timestamps, strict=True):
            if raw is None or (self._newest is not None and ts < self._newest[0]):
                continue
            schema = self._split(raw, where, payload=False)[0]
            if schema is not None and schema.columns is not None:
                self._newest = (ts, schema)

    @property
    def newest(self) -> _RowSchema | None:
        return None if self._newest is None else self._newest[1]

    @property
    def newest_mark(self) -> tuple[int, str] | None:
        """The newest schema and its record time, for an output to keep: a later snapshot then learns only
        from the partitions that changed since (streaming.table.values.TableShape.seed)."""
        return None if self._newest is None else (self._newest[0], self._newest[1].key.decode())

    def seed(self, mark: tuple[int, str], where: str) -> None:
        """The newest schema an earlier snapshot learned (newest_mark)."""
        ms, text = mark
        if self._newest is None or ms > self._newest[0]:
            key = text.encode()
            known = self._schemas.get(key)
            if known is None:
                parsed = json.loads(key[len(SCHEMA_OPEN):] if key.startswith(SCHEMA_OPEN) else key)
                known = self._decode_schema(key, parsed, where)
            self._newest = (ms, known)

    def newest_fields(self) -> list[pa.Field] | None:
        """The newest schema's columns as fields (None: none learned), each with its default."""
        newest = self.newest
        if newest is None:
            return None
        return [with_default(pa.field(c.name, c.kind), c.default, None) for c in (newest.columns or {}).values()]

    def rows(self, values: list[bytes], keys: list[bytes], where: str,
             timestamps_ms: list[int] | None = None) -> tuple[pa.Table, list[int]]:
        """The live rows of these records (a partition's winners) as a table of the database's columns, and
        the index of each row's record among them. The key's fields are columns too: a field of the key
        that the row lacks (a key made of other columns, `message.key.columns`) is taken from the key.
        ``timestamps_ms``: the records' times, which tell a row written before a column from one after it."""
        decoded = self._decoded(values, where)
        if timestamps_ms is not None:
            decoded.timestamps_ms = [timestamps_ms[i] for i in decoded.kept]
        table = _table(decoded, where, self.newest)
        if not decoded.kept:
            return table, decoded.kept
        first = self._split(keys[decoded.kept[0]], where)[1]
        if isinstance(first, dict) and set(first) - set(table.column_names):
            key_columns = _table(self._decoded([keys[i] for i in decoded.kept], where), where, None)
            missing = [c for c in key_columns.column_names if c not in table.column_names]
            table = pa.Table.from_arrays([*key_columns.select(missing).columns, *table.columns],
                                         schema=pa.schema([*(key_columns.schema.field(c) for c in missing),
                                                           *table.schema]))
        return table, decoded.kept

    def _decoded(self, values: list[bytes], where: str) -> _Decoded:
        decoded = _Decoded()
        for i, raw in enumerate(values):
            schema, payload = self._split(raw, where)
            row = self._row(payload, schema is not None and schema.envelope, where)
            if row is not None:
                decoded.rows.append(row)
                decoded.kept.append(i)
                decoded.schemas.append(schema if schema is not None and schema.columns is not None else None)
        return decoded

    def _split(self, raw: bytes, where: str, payload: bool = True) -> tuple[_RowSchema | None, object]:
        """A value's schema and payload (not parsed, None, unless ``payload``). JsonConverter writes
        {"schema":...,"payload":...}: the schema's text is cut off and decoded once per distinct text, and
        only the payload is parsed, with its numbers exact where the schema has a decimal."""
        raw = raw.rstrip()
        if raw.startswith(SCHEMA_OPEN):
            cut = raw.find(PAYLOAD)
            if cut > 0:
                key = raw[:cut]
                known = self._schemas.get(key)
                if known is None:
                    try:
                        schema = json.loads(key[len(SCHEMA_OPEN):])
                    except ValueError:  # the cut fell inside the schema's text
                        pass
                    else:
                        known = self._decode_schema(key, schema, where)
                if known is not None:
                    return known, self._payload(known, raw[cut + len(PAYLOAD):-1], where) if payload else None
            whole = _loads(raw, where, True)  # parse it all
            if isinstance(whole, dict) and set(whole) == {"schema", "payload"}:
                key = json.dumps(whole["schema"], default=str).encode()
                return self._schemas.get(key) or self._decode_schema(key, whole, where), whole["payload"]
        return None, _loads(raw, where, False) if payload else None

    def _payload(self, schema: _RowSchema, text: bytes, where: str) -> object:
        """A payload, its numbers parsed exactly where the schema's decimals come as JSON numbers
        (decimal.format=NUMERIC), which a float would round; the first payload with a decimal's value tells."""
        decimals = schema.decimals
        exact = bool(decimals) and self._numbers.get(schema.key, True)
        parsed = _loads(text, where, exact)
        if exact and schema.key not in self._numbers and isinstance(parsed, dict):
            row = parsed.get("after") if schema.envelope else parsed
            given = [row.get(n) for n in decimals if row.get(n) is not None] if isinstance(row, dict) else []
            if given:
                self._numbers[schema.key] = not isinstance(given[0], str)
        return parsed

    def _decode_schema(self, key: bytes, parsed: object, where: str) -> _RowSchema:
        """The row's columns of a value schema: an envelope's ``after``, or the value's own struct (flattened)."""
        schema = parsed["schema"] if isinstance(parsed, dict) and "payload" in parsed else parsed
        if schema is None:
            decoded = _RowSchema(key, None, False)
        else:
            fields = {f.get("field"): f for f in schema.get("fields") or []}
            envelope = "op" in fields and "after" in fields
            row = fields["after"] if envelope else schema
            try:
                typed = row_fields(row)
            except ConnectSchemaError as exc:
                raise ChangeEventError(f"{where}: {exc}") from None
            columns = {name: _Column(name, kind, convert, connect)
                       for (name, kind, convert), connect in zip(typed, row.get("fields") or [], strict=True)
                       if not name.startswith(ADDED)}
            decoded = _RowSchema(key, columns, envelope,
                                 tuple(c.name for c in columns.values() if c.connect.get("name") == DECIMAL))
        self._schemas[key] = decoded
        return decoded

    def _row(self, payload: object, envelope: bool, where: str) -> dict | None:
        """The row a payload makes live, or None for a delete."""
        if payload is None:
            if self.null_deletes:
                return None
            raise ChangeEventError(f"{where}: a value is JSON null, which is how Debezium's ExtractNewRecordState "
                                   f"writes a delete by default: give --json-null-deletes to read it as one, or "
                                   f"set delete.tombstone.handling.mode=rewrite-with-tombstone on the connector")
        if not isinstance(payload, dict):
            raise ChangeEventError(f"{where}: a value is not a JSON object and not a Debezium change event; use "
                                   f"--value-format string or binary")
        if envelope or ("op" in payload and "after" in payload and "source" in payload):
            if payload.get("op") == "d" or payload.get("after") is None:
                return None
            payload = payload["after"]
        elif str(payload.get("__deleted", "false")).lower() == "true":
            return None
        return {k: v for k, v in payload.items() if not k.startswith(ADDED)}


EXACT_JSON = json.JSONDecoder(parse_float=decimal.Decimal)


def _loads(text: bytes, where: str, exact: bool):
    try:
        return EXACT_JSON.decode(text.decode()) if exact else json.loads(text)
    except ValueError:
        raise ChangeEventError(f"{where}: a value is not JSON, so not a Debezium change event from JsonConverter; "
                               f"use --value-format string or binary") from None


def _table(decoded: _Decoded, where: str, newest: _RowSchema | None) -> pa.Table:
    """The rows as columns: typed by their Connect schemas (the newest one's columns when given, else every
    schema version's, in the order they first appear), or inferred when no value carried one."""
    distinct = {s.key: s for s in decoded.schemas if s is not None}
    if not distinct:
        if not decoded.rows:
            return pa.table({})
        try:
            inferred = pa.array(decoded.rows)
        except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
            raise ChangeEventError(f"{where}: the rows' fields do not share one type each ({exc}); give the "
                                   f"connector JsonConverter with schemas.enable=true") from None
        table = pa.Table.from_struct_array(inferred) if inferred.type.num_fields else pa.table({})
        return table.cast(pa.schema([pa.field(f.name, storable(f.type)) for f in table.schema]))
    if any(s is None for s in decoded.schemas):
        raise ChangeEventError(f"{where}: some values carry a Connect schema and some do not; give every "
                               f"connector writing the topic the same converter settings")
    columns = dict(newest.columns or {}) if newest is not None else _union(distinct.values(), where)
    groups: dict[bytes, list[int]] = {}
    for i, s in enumerate(decoded.schemas):
        groups.setdefault(s.key, []).append(i)
    times = decoded.timestamps_ms
    parts = [_Group(distinct[k], idx, decoded.rows if len(groups) == 1 else [decoded.rows[i] for i in idx],
                    None if times is None else pa.array([times[i] for i in idx], pa.int64()))
             for k, idx in groups.items()]
    order = None if len(groups) == 1 else pc.sort_indices(pa.array([i for g in parts for i in g.indices]))
    fields = [_field(c, parts) for c in columns.values()]
    arrays = [_column(parts, c, f, order, where) for c, f in zip(columns.values(), fields, strict=True)]
    return pa.Table.from_arrays(arrays, schema=pa.schema(fields))


@dataclass(frozen=True)
class _Group:
    """A partition's rows written under one schema version."""

    schema: _RowSchema
    indices: list[int]
    rows: list[dict]
    timestamps_ms: pa.Array | None

    @cached_property
    def since_ms(self) -> int | None:
        return None if self.timestamps_ms is None else pc.min(self.timestamps_ms).as_py()


def _field(column: _Column, parts: list[_Group]) -> pa.Field:
    """The column's field, with where it began (streaming.table.column_defaults): the default of the
    earliest schema version that has it, and the time of that version's earliest record."""
    having = [(g.since_ms, g.schema.columns[column.name]) for g in parts if column.name in (g.schema.columns or {})]
    timed = [h for h in having if h[0] is not None]
    since, first = min(timed, key=lambda h: h[0]) if timed else (None, column)
    return with_default(pa.field(column.name, column.kind), first.default, since)


def _union(schemas: Iterable[_RowSchema], where: str) -> dict[str, _Column]:
    """Every schema version's columns, a column widened where a later version widens it; a type changed
    otherwise is refused: the output would hold one column in two types."""
    columns: dict[str, _Column] = {}
    for schema in schemas:
        for name, column in (schema.columns or {}).items():
            known = columns.get(name)
            if known is None or widens(known.kind, column.kind):  # a wider type's converter takes the narrower values
                columns[name] = column
            elif known.kind != column.kind and not widens(column.kind, known.kind):
                raise SchemaChangeError(f"{where}: column {name} is {known.kind} in one Connect schema and "
                                        f"{column.kind} in another: {WAY_OUT}")
    return columns


def _column(parts: list[_Group], column: _Column, field: pa.Field, order: pa.Array | None, where: str) -> pa.Array:
    """One column of the rows, each group of rows read by its own schema's converter (a type's unit may
    differ between versions: milliseconds, microseconds): the values, in the column's type where they had
    another, without loss; where that schema lacks the column, its default (or null)."""
    pieces = []
    for g in parts:
        own = (g.schema.columns or {}).get(column.name)
        try:
            if own is None:
                pieces.append(filled(field, len(g.indices), g.timestamps_ms))
            else:
                pieces.append(converted(own.convert([row.get(column.name) for row in g.rows]), column.kind))
        except LossyChange as exc:
            raise SchemaChangeError(f"{where}: column {column.name} is {own.kind if own else None} in rows written "
                                    f"under an older Connect schema, and the newest has {column.kind}: {exc}; "
                                    f"those rows cannot be shown in the newest schema until the source writes "
                                    f"them again") from None
        except (pa.ArrowInvalid, pa.ArrowTypeError, ValueError, TypeError, KeyError) as exc:
            raise ChangeEventError(f"{where}: column {column.name}'s values do not fit its Connect schema "
                                   f"({column.kind}): {exc}") from None
    return pieces[0] if order is None else pa.concat_arrays(pieces).take(order)
