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

import json
from dataclasses import dataclass, field

import pyarrow as pa

from streaming.table.connect_types import ConnectSchemaError, Converter, row_fields
from streaming.table.evolution import storable, widens

PAYLOAD = b',"payload":'
SCHEMA_OPEN = b'{"schema":'
ADDED = "__"  # ExtractNewRecordState's prefix for the fields it adds


class ChangeEventError(ConnectSchemaError):
    """A value that is not a Debezium change event."""


@dataclass(frozen=True)
class _RowSchema:
    """A value's Connect schema, decoded: the row's typed fields (None: the schema is null), and whether it
    is an envelope's."""

    key: bytes
    fields: list[tuple[str, pa.DataType, Converter]] | None
    envelope: bool


@dataclass
class _Decoded:
    """One partition's live rows, each with the Connect schema it came with (None: schemaless)."""

    rows: list[dict] = field(default_factory=list)
    kept: list[int] = field(default_factory=list)  # each row's index in the partition's records
    schemas: list[_RowSchema | None] = field(default_factory=list)


class ChangeEvents:
    """The decoder of one snapshot, which keeps each distinct Connect schema decoded once: a message carries
    its schema whole, and a table's messages share a few."""

    def __init__(self, null_deletes: bool) -> None:
        self.null_deletes = null_deletes
        self._schemas: dict[bytes, _RowSchema] = {}

    def rows(self, values: list[bytes], keys: list[bytes], where: str) -> tuple[pa.Table, list[int]]:
        """The live rows of these records (a partition's winners) as a table of the database's columns, and
        the index of each row's record among them. The key's fields are columns too: a field of the key
        that the row lacks (a key made of other columns, `message.key.columns`) is taken from the key."""
        decoded = self._decoded(values, where)
        table = _table(decoded, where)
        if not decoded.kept:
            return table, decoded.kept
        first = self._split(keys[decoded.kept[0]], where)[1]
        if isinstance(first, dict) and set(first) - set(table.column_names):
            key_columns = _table(self._decoded([keys[i] for i in decoded.kept], where), where)
            missing = [c for c in key_columns.column_names if c not in table.column_names]
            table = pa.Table.from_arrays([*key_columns.select(missing).columns, *table.columns],
                                         names=[*missing, *table.column_names])
        return table, decoded.kept

    def _decoded(self, values: list[bytes], where: str) -> _Decoded:
        decoded = _Decoded()
        for i, raw in enumerate(values):
            schema, payload = self._split(raw, where)
            row = self._row(payload, schema is not None and schema.envelope, where)
            if row is not None:
                decoded.rows.append(row)
                decoded.kept.append(i)
                decoded.schemas.append(schema if schema is not None and schema.fields is not None else None)
        return decoded

    def _split(self, raw: bytes, where: str) -> tuple[_RowSchema | None, object]:
        """A value's schema and payload. JsonConverter writes {"schema":...,"payload":...}: the schema's text
        is cut off and decoded once per distinct text, and only the payload is parsed."""
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
                    return known, _loads(raw[cut + len(PAYLOAD):-1], where)
            whole = _loads(raw, where)  # parse it all
            if isinstance(whole, dict) and set(whole) == {"schema", "payload"}:
                key = json.dumps(whole["schema"]).encode()
                return self._schemas.get(key) or self._decode_schema(key, whole, where), whole["payload"]
        return None, _loads(raw, where)

    def _decode_schema(self, key: bytes, parsed: object, where: str) -> _RowSchema:
        """The row's fields of a value schema: an envelope's ``after``, or the value's own struct (flattened)."""
        schema = parsed["schema"] if isinstance(parsed, dict) and "payload" in parsed else parsed
        if schema is None:
            decoded = _RowSchema(key, None, False)
        else:
            fields = {f.get("field"): f for f in schema.get("fields") or []}
            envelope = "op" in fields and "after" in fields
            try:
                typed = row_fields(fields["after"] if envelope else schema)
            except ConnectSchemaError as exc:
                raise ChangeEventError(f"{where}: {exc}") from None
            decoded = _RowSchema(key, [f for f in typed if not f[0].startswith(ADDED)], envelope)
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


def _loads(text: bytes, where: str):
    try:
        return json.loads(text)
    except ValueError:
        raise ChangeEventError(f"{where}: a value is not JSON, so not a Debezium change event from JsonConverter; "
                               f"use --value-format string or binary") from None


def _table(decoded: _Decoded, where: str) -> pa.Table:
    """The rows as columns: typed by their Connect schemas (columns of every schema version, in the order
    they first appear), or inferred when no value carried one."""
    typed = {s.key: s.fields for s in decoded.schemas if s is not None}
    if not typed:
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
    columns: dict[str, tuple[pa.DataType, Converter]] = {}
    for fields in typed.values():
        for name, kind, convert in fields:
            known = columns.get(name)
            if known is None or widens(known[0], kind):  # a wider type's converter takes the narrower values
                columns[name] = (kind, convert)
            elif known[0] != kind and not widens(kind, known[0]):
                raise ChangeEventError(f"{where}: column {name} is {known[0]} in one Connect schema and {kind} in "
                                       f"another; write a new output to start from the new type")
    arrays = []
    for name, (kind, convert) in columns.items():
        try:
            arrays.append(convert([row.get(name) for row in decoded.rows]))
        except (pa.ArrowInvalid, pa.ArrowTypeError, ValueError, TypeError, KeyError) as exc:
            raise ChangeEventError(f"{where}: column {name}'s values do not fit its Connect schema ({kind}): "
                                   f"{exc}") from None
    return pa.Table.from_arrays(arrays, schema=pa.schema([pa.field(n, t) for n, (t, _) in columns.items()]))
