"""JSON documents in the state directory, replaced whole: a reader beside a running job (status) or a
restart after a crash sees the old document or the new one, never half of one."""

from __future__ import annotations

import json

from streaming.log.storage import Storage


def write_json(storage: Storage, path: str, doc: object, indent: int | None = 1) -> None:
    storage.put(path, json.dumps(doc, indent=indent, sort_keys=True).encode())


def read_json(storage: Storage, path: str) -> dict | None:
    """The document, or None when there is none yet."""
    try:
        return json.loads(storage.get(path))
    except FileNotFoundError:
        return None
