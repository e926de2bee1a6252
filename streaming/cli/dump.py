"""`kcompact dump`: the records of the compactor's logs, read-only, as JSON lines or a table."""

from __future__ import annotations

import base64
import json
from typing import Iterator

from streaming.errors import UsageError
from streaming.job.spec import load_saved
from streaming.log.columns import iter_records
from streaming.log.manifest import load_newest
from streaming.log.read_hold import holding
from streaming.log.segment_read import read_segment
from streaming.state.layout import list_log_dirs
from streaming.state.stores import StateDir, check_access, open_state_dir
from streaming.utc import utc_text


def text(b: bytes | None) -> str | dict | None:
    """Bytes as a string when they are UTF-8, else {"base64": ...} so nothing is mangled."""
    if b is None:
        return None
    try:
        return b.decode("utf-8")
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(b).decode()}


TABLE_HEADER = f"{'partition':<20} {'offset':>10} {'timestamp (UTC)':<23}  {'key':<24} value"


def dump_records(state_dir: str, partition: int | None = None, topic: str | None = None) -> Iterator[dict]:
    """Read-only: each log's newest manifest is read, never a log opened for writing, so a dump beside a
    running job reads one consistent version of each log (its hold keeps the objects; see read_hold).
    A state dir, topic or partition the job does not have is an error here, before the first record."""
    state = open_state_dir(state_dir)
    check_access(state, write=False)
    saved = load_saved(state)
    wanted = [saved.plan_of(topic, state_dir)] if topic is not None else list(saved.topics.values())
    if partition is not None and not any(0 <= partition < plan.partitions for plan in wanted):
        most = max((plan.partitions for plan in wanted), default=0)
        raise UsageError(f"--partition {partition}: the job's topics have partitions 0..{most - 1}")
    return _records(state, partition, topic)


def _records(state: StateDir, partition: int | None, topic: str | None) -> Iterator[dict]:
    for log_dir in list_log_dirs(state):
        (t, p), directory = (log_dir.pid.topic, log_dir.pid.partition), log_dir.directory
        if (partition is not None and p != partition) or (topic is not None and t != topic):
            continue
        with holding(state.storage, directory):
            manifest = load_newest(state.storage, directory).manifest
            for seg in manifest.segments if manifest else []:
                for r in iter_records(read_segment(state.storage, directory, seg, check=False)):
                    yield {"topic": t, "partition": p, "offset": r["offset"], "timestamp": r["timestamp"],
                           "key": text(r["key"]), "value": text(r["value"]),
                           "headers": [[h["key"], text(h["value"])] for h in r["headers"]],
                           "delete_horizon_ms": r.get("delete_horizon_ms")}


def render_jsonl(rec: dict) -> str:
    return json.dumps(rec, ensure_ascii=False)


def render_row(rec: dict) -> str:
    when = utc_text(rec["timestamp"], millis=True)

    def short(v) -> str:
        s = "null" if v is None else json.dumps(v, ensure_ascii=False) if isinstance(v, dict) else v
        return s if len(s) <= 40 else s[:37] + "..."

    return (f"{rec['topic'] + '-' + str(rec['partition']):<20} {rec['offset']:>10} {when:<23}  "
            f"{short(rec['key']):<24} {short(rec['value'])}")
