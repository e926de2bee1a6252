"""`kcompact erasures`: when each deleted key left the compactor's log and reached the sink, read from the
erase audit the partition logs' journals hold. Read-only, like status: safe beside a running job.

What happens outside the compactor is named too, since it bounds the erasure as much: the source topic
keeps a key's older records for its own retention, and the sink drops its older values only when its own
cleaner compacts it.
"""

from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass, field
from datetime import datetime, timezone

from streaming.erasure.entries import Erasure, deadline_ms, fold
from streaming.errors import UsageError
from streaming.names import names_text
from streaming.job.spec import SavedJob, load_saved
from streaming.log.journal import committed_journal
from streaming.readable import duration_text
from streaming.configuration.settings import LONG_MAX
from streaming.state.layout import list_log_dirs
from streaming.state.stores import check_access, open_state_dir
from streaming.utc import utc_or_dash

SOURCE_KEYS = ("cleanup.policy", "retention.ms", "max.compaction.lag.ms")
SINK_KEYS = ("cleanup.policy", "max.compaction.lag.ms", "delete.retention.ms", "retention.ms")


@dataclass(frozen=True)
class Query:
    topics: tuple[str, ...] | None = None  # --topic: names or patterns
    key: str | None = None
    since_ms: int | None = None
    overdue: bool = False


@dataclass
class Listed:
    """One entry as listed: the entry, what is overdue about it (None: nothing), and how long past its delete
    horizon it waits in the log for the sink (None: it does not)."""

    entry: Erasure
    overdue: str | None = None
    held_for_sink_ms: int | None = None

    def to_doc(self) -> dict:
        return {**self.entry.to_doc(), "overdue": self.overdue, "held_for_sink_ms": self.held_for_sink_ms}


@dataclass
class ErasureList:
    state_dir: str
    at_ms: int
    deadlines_ms: dict[str, int]  # by source topic
    listed: list[Listed]
    outside: list[str] = field(default_factory=list)

    @property
    def overdue(self) -> list[Listed]:
        return [item for item in self.listed if item.overdue]

    def to_doc(self) -> dict:
        return {"state_dir": self.state_dir, "at_ms": self.at_ms,
                "deadlines_ms": {t: None if d >= LONG_MAX else d for t, d in self.deadlines_ms.items()},
                "entries": [item.to_doc() for item in self.listed], "overdue": len(self.overdue),
                "outside": self.outside}


def parse_since(text: str) -> int:
    """ms since the epoch, or an ISO 8601 time (UTC unless it says otherwise)."""
    if text.strip().lstrip("-").isdigit():
        return int(text)
    try:
        when = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise UsageError(f"--since {text!r}: not a time; give ms since the epoch or ISO 8601, e.g. "
                         f"2026-11-24T06:00:00") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return int(when.timestamp() * 1000)


def _matches(entry: Erasure, query: Query) -> bool:
    if query.key is not None:
        raw = query.key.encode()
        return entry.key_sha256 == hashlib.sha256(raw).hexdigest() or entry.key == base64.b64encode(raw).decode()
    return query.since_ms is None or (entry.timestamp_ms is not None and entry.timestamp_ms >= query.since_ms)


def collect_erasures(state_dir: str, query: Query, now_ms: int) -> tuple[ErasureList, SavedJob]:
    state = open_state_dir(state_dir)
    check_access(state, write=False)
    saved = load_saved(state)
    plans = saved.selected(query.topics, state_dir)
    deadlines = {t: deadline_ms(p.compaction.max_compaction_lag_ms, saved.trigger_interval_ms)
                 for t, p in plans.items()}
    listed = []
    for log_dir in list_log_dirs(state):
        topic = log_dir.pid.topic
        if topic not in plans:
            continue
        for entry in fold(log_dir.pid, committed_journal(state.storage, log_dir.directory)):
            if _matches(entry, query):
                late = entry.overdue(now_ms, deadlines[topic])
                if late or not query.overdue:
                    listed.append(Listed(entry, late, entry.held_for_sink_ms(now_ms)))
    listed.sort(key=lambda item: (item.entry.topic, item.entry.partition, item.entry.offset))
    return ErasureList(state_dir, now_ms, deadlines, listed), saved


def outside_notes(configs_of_source: dict[str, str] | str, configs_of_sink: dict[str, str] | str,
                  topic: str, sink: str) -> list[str]:
    """What bounds an erasure beyond the compactor, from the topics' effective configs (or why they could
    not be read)."""
    lines = []
    if isinstance(configs_of_source, str):
        lines.append(f"source topic {topic}: its retention could not be read ({configs_of_source})")
    else:
        policy = configs_of_source.get("cleanup.policy", "?")
        retention = int(configs_of_source.get("retention.ms", "-1"))
        if "delete" in policy:
            kept = "forever" if retention < 0 else f"for {duration_text(retention)} after they were written"
            lines.append(f"source topic {topic} (cleanup.policy={policy}, retention.ms={retention}): keeps a deleted "
                         f"key's older records {kept}, whatever the compactor does")
        else:
            lag = int(configs_of_source.get("max.compaction.lag.ms", LONG_MAX))
            lines.append(f"source topic {topic} (cleanup.policy={policy}, no retention by time): keeps a deleted "
                         f"key's older records until its own cleaner compacts them, within max.compaction.lag.ms="
                         f"{duration_text(lag)}")
    if isinstance(configs_of_sink, str):
        lines.append(f"sink topic {sink}: its compaction settings could not be read ({configs_of_sink})")
    else:
        lag = int(configs_of_sink.get("max.compaction.lag.ms", LONG_MAX))
        bound = f"within max.compaction.lag.ms={duration_text(lag)} of the tombstone's arrival" if lag < LONG_MAX else \
            "with no bound in time (set max.compaction.lag.ms on it to bound that)"
        lines.append(f"sink topic {sink} (cleanup.policy={configs_of_sink.get('cleanup.policy', '?')}, "
                     f"delete.retention.ms={duration_text(int(configs_of_sink.get('delete.retention.ms', '86400000')))}): "
                     f"drops a deleted key's older values when its own cleaner compacts them, {bound}")
    return lines


def _after(ms: int | None, since: int | None) -> str:
    return "" if ms is None or since is None else f" (+{(ms - since) / 1000:.1f}s)"


SHOWN = 50  # entries a person reads; past this, the overdue ones, and --json for every one


def render_table(found: ErasureList) -> str:
    header = (f"{'partition':<20} {'offset':>8}  {'key':<16} {'tombstone (UTC)':<19}  {'erased from log (UTC)':<30} "
              f"{'in sink (UTC)':<30} {'sink offset':>11}  {'tombstone removed':<19}  state")
    by_deadline: dict[int, list[str]] = {}
    for topic, due in sorted(found.deadlines_ms.items()):
        by_deadline.setdefault(due, []).append(topic)
    lines = [f"erase audit of {found.state_dir}: {len(found.listed)} entries, {len(found.overdue)} overdue "
             f"(due: max.compaction.lag.ms plus one trigger after the tombstone: " +
             ", ".join(f"{names_text(topics)} {duration_text(due)}" for due, topics in by_deadline.items()) + ")",
             header]
    listed = found.listed if len(found.listed) <= SHOWN else [i for i in found.listed if i.overdue][:SHOWN]
    for item in listed:
        e = item.entry
        key = e.key_sha256[:12] + "…" if e.key_sha256 else base64.b64decode(e.key or "").decode(errors="replace")[:16]
        sink = utc_or_dash(e.sink_ms) + _after(e.sink_ms, e.timestamp_ms) + (" r" if e.sink_recovered else "")
        state = f"OVERDUE: {item.overdue}" if item.overdue else e.state if item.held_for_sink_ms is None else \
            f"held for the sink, {duration_text(item.held_for_sink_ms)} past its delete horizon"
        lines.append(f"{f'{e.topic}-{e.partition}':<20} {e.offset:>8}  {key:<16} {utc_or_dash(e.timestamp_ms):<19}  "
                     f"{utc_or_dash(e.erased_ms) + _after(e.erased_ms, e.timestamp_ms):<30} {sink:<30} "
                     f"{'-' if e.sink_offset is None else e.sink_offset:>11}  {utc_or_dash(e.removed_ms):<19}  {state}")
    if len(listed) < len(found.listed):
        lines.append(f"({len(found.listed) - len(listed)} more entries not shown"
                     f": --topic, --key, --since or --overdue narrow, --json lists every one)")
    if any(item.entry.sink_recovered for item in found.listed):
        lines.append("r: the job stopped between the sink's commit and the audit's; the time is when it was found")
    if found.outside:
        lines += ["outside the compactor:", *(f"  {line}" for line in found.outside)]
    return "\n".join(lines)
