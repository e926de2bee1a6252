"""JSON documents in the state directory, replaced whole: a reader beside a running job (status) or a
restart after a crash sees the old document or the new one, never half of one."""

from __future__ import annotations

import json
import os


def write_json(path: str, doc: object, indent: int | None = 1) -> None:
    with open(path + ".tmp", "w") as f:
        json.dump(doc, f, indent=indent, sort_keys=True)
    os.replace(path + ".tmp", path)


def read_json(path: str) -> dict | None:
    """The document, or None when there is none yet."""
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)
