"""Debezium change events as Debezium 3.6.1 on Connect 4.3.0 writes them with JsonConverter and
schemas.enable=true: the envelope, its Connect schema whole in each message."""

from __future__ import annotations

import json


def envelope(op: str, after: dict | None, fields: list[dict]) -> bytes:
    row = {"type": "struct", "fields": fields, "optional": True, "name": "cdc.public.t.Value", "field": "after"}
    schema = {"type": "struct", "fields": [{**row, "field": "before"}, row,
                                           {"type": "struct", "fields": [], "optional": False, "field": "source"},
                                           {"type": "string", "optional": False, "field": "op"}],
              "optional": False, "name": "cdc.public.t.Envelope", "version": 2}
    payload = {"before": None, "after": after, "source": {"db": "shop"}, "op": op}
    return json.dumps({"schema": schema, "payload": payload}, separators=(",", ":")).encode()
