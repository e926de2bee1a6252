"""`kcompact dump`: the records of the compactor's logs, read-only, as JSON lines or a table."""

from __future__ import annotations

import base64
import json
import os
from datetime import datetime, timezone
from typing import Iterator

from streaming.log import LocalStorage
from streaming.log.segment import iter_file, read_segment_metas, segment_name
from streaming.state.layout import list_log_dirs


def text(b: bytes | None) -> str | dict | None:
    """Bytes as a string when they are UTF-8, else {"base64": ...} so nothing is mangled."""
    if b is None:
        return None
    try:
        return b.decode("utf-8")
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(b).decode()}


def dump_records(state_dir: str, partition: int | None = None, topic: str | None = None) -> Iterator[dict]:
    storage = LocalStorage(fsync=False)
    for t, p, directory in list_log_dirs(state_dir):
        if (partition is not None and p != partition) or (topic is not None and t != topic):
            continue
        for seg in read_segment_metas(storage, directory):
            path = os.path.join(directory, segment_name(seg.base_offset))
            if not storage.exists(path):
                continue  # swapped away by a running cleaner since the listing
            for r in iter_file(storage, path):
                yield {"topic": t, "partition": p, "offset": r["offset"], "timestamp": r["timestamp"],
                       "key": text(r["key"]), "value": text(r["value"]),
                       "headers": [[h["key"], text(h["value"])] for h in r["headers"]],
                       "delete_horizon_ms": r.get("delete_horizon_ms")}


def render_jsonl(rec: dict) -> str:
    return json.dumps(rec, ensure_ascii=False)


def render_row(rec: dict) -> str:
    when = datetime.fromtimestamp(rec["timestamp"] / 1000, timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]

    def short(v) -> str:
        s = "null" if v is None else json.dumps(v, ensure_ascii=False) if isinstance(v, dict) else v
        return s if len(s) <= 40 else s[:37] + "..."

    return (f"{rec['topic']}-{rec['partition']} {rec['offset']:>10} {when}  {short(rec['key']):<24} "
            f"{short(rec['value'])}")
