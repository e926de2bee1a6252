"""`kcompact status`: what the compactor's state directory says, for a person or a program.

Read-only: manifests and state documents are read, never a log opened for writing, so status is safe
beside a running job and works when the job is down.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Sequence

from streaming.readable import number_text
from streaming.names import names_text
from streaming.cleaner import (CleanerMetrics, PartitionCleanerState, PartitionFigures, log_to_clean,
                               next_clean)
from streaming.disaster.mark import switched
from streaming.disaster.report import SwitchReport
from streaming.job.emission_note import EmissionNote
from streaming.job.held_sinks import read_held
from streaming.job.spec import JobMapping, TopicPlan, load_saved
from streaming.partition_id import PartitionId
from streaming.log.manifest import load_newest, objects_dir
from streaming.log.segment import object_damage
from streaming.job.metrics import TABLE_OK, TableState, emit_lag, ingest_lag, read_doc
from streaming.state.layout import list_log_dirs
from streaming.state.stores import check_access, open_state_dir
from streaming.utc import utc_or_dash, utc_text


NOT_INGESTED = "not ingested yet"
HELD = "HELD"  # another writer's transaction is open on its sink partition: nothing is emitted to it


@dataclass
class PartitionStatus:
    """One source partition of the mapping as its files say. A partition not ingested yet has no log: its
    log figures are None."""

    topic: str
    partition: int
    sink_topic: str
    state: str  # ok, UNCLEANABLE, HELD (a transaction left open on its sink) or NOT_INGESTED
    source_end_offset: int | None = None
    uncleanable: bool = False
    uncleanable_error: str | None = None
    damaged_segments: dict[str, str] = field(default_factory=dict)
    log_start_offset: int | None = None
    log_end_offset: int | None = None
    segments: int | None = None
    records: int | None = None
    clean_bytes: int | None = None
    dirty_bytes: int | None = None
    dirty_ratio: float | None = None
    first_dirty_offset: int | None = None
    first_uncleanable_offset: int | None = None
    last_clean_ms: int | None = None
    compaction_delay_ms: int | None = None
    tombstones_due: int | None = None
    passes: int | None = None
    next_clean_ms: int | None = None
    next_clean_latest_ms: int | None = None
    emitted_up_to: int | None = None
    ingest_lag: int | None = None
    emit_lag: int | None = None
    keyless_records: int | None = None
    tombstones_removed: int | None = None
    held_by: str | None = None  # another writer's transaction open on its sink partition: its start and since when


@dataclass
class JobStatus:
    state_dir: str
    mapping: JobMapping
    topics: dict[str, TopicPlan]
    at_ms: int
    partitions: list[PartitionStatus]
    metrics: dict  # Kafka's cleaner metric names
    job: dict  # the job's counters at its last trigger (metrics.json)
    group_sync: dict | None
    tables: tuple[TableState, ...] = ()  # the tables kept in step (--snapshot-every), at the last snapshot round
    switch: SwitchReport | None = None  # kcompact promote's or failover's report: the job mirrors no more
    job_at_ms: int | None = None  # the last trigger's time (metrics.json)

    def to_doc(self) -> dict:
        """The JSON `status --json` prints."""
        return {"state_dir": self.state_dir, "mapping": self.mapping.describe(),
                "topics": {t: p.to_doc() for t, p in sorted(self.topics.items())}, "at_ms": self.at_ms,
                "partitions": [asdict(p) for p in self.partitions], "metrics": self.metrics, "job": self.job,
                "group_sync": self.group_sync, "tables": [asdict(t) for t in self.tables],
                "switch": None if self.switch is None else self.switch.to_doc()}


def collect_status(state_dir: str, now_ms: int, topics: Sequence[str] | None = None) -> JobStatus:
    """``topics``: --topic's selectors (names or patterns); None: every topic the job mirrors."""
    state = open_state_dir(state_dir)
    check_access(state, write=False)
    saved = load_saved(state)
    plans = saved.selected(topics, state_dir)
    storage = state.storage
    last = read_doc(state)
    source_ends = {p.pid: p.source_end_offset for p in last.partitions} if last else {}
    held = read_held(state)
    partitions = []
    figures = []
    for log_dir in list_log_dirs(state):
        topic, partition = log_dir.pid.topic, log_dir.pid.partition
        loaded = load_newest(storage, log_dir.directory)
        if loaded.manifest is None or topic not in plans:
            continue
        segments = loaded.manifest.segments
        config = plans[topic].compaction
        cleaner = PartitionCleanerState.of(loaded.manifest.marks, storage, log_dir.directory)
        target = log_to_clean(segments, log_dir.pid, loaded.manifest.cleaner_checkpoint, config, now_ms)
        waiting = next_clean(segments, target, config)
        damaged = object_damage(segments, {i.name: i.size for i in storage.list(objects_dir(log_dir.directory))})
        uncleanable = cleaner.uncleanable or bool(damaged)
        figures.append(PartitionFigures().observed(target, cleaner, uncleanable))
        note = EmissionNote.of(loaded.manifest.marks, storage, log_dir.directory)
        emitted_up_to = None if note is None else note.emitted_up_to
        log_end = segments[-1].next_offset
        source_end = source_ends.get(log_dir.pid)
        tx = held.get(PartitionId(plans[topic].sink, partition))
        held_by = None if tx is None else f"another writer's transaction open at sink offset {tx.start} since " \
                                          f"{utc_text(tx.since_ms)} UTC"
        partitions.append(PartitionStatus(
            topic, partition, plans[topic].sink, "UNCLEANABLE" if uncleanable else HELD if tx else "ok", source_end,
            uncleanable,
            cleaner.uncleanable_error, damaged, log_start_offset=target.log_start_offset, log_end_offset=log_end,
            segments=len(segments), records=sum(s.record_count for s in segments),
            clean_bytes=target.clean_bytes, dirty_bytes=target.cleanable_bytes,
            dirty_ratio=round(target.cleanable_ratio, 4), first_dirty_offset=target.first_dirty_offset,
            first_uncleanable_offset=target.first_uncleanable_offset, last_clean_ms=cleaner.last_clean_ms,
            compaction_delay_ms=target.compaction_delay_ms, tombstones_due=target.tombstones_due,
            passes=cleaner.passes, next_clean_ms=waiting.earliest_ms if waiting else None,
            next_clean_latest_ms=waiting.latest_ms if waiting else None, emitted_up_to=emitted_up_to,
            ingest_lag=ingest_lag(source_end, log_end), emit_lag=emit_lag(log_end, emitted_up_to),
            keyless_records=cleaner.keyless_records, tombstones_removed=cleaner.tombstones_removed, held_by=held_by))
    seen = {PartitionId(p.topic, p.partition) for p in partitions}
    partitions += [PartitionStatus(t, p, plan.sink, NOT_INGESTED, source_ends.get(PartitionId(t, p)))
                   for t, plan in sorted(plans.items()) for p in range(plan.partitions)
                   if PartitionId(t, p) not in seen]
    partitions.sort(key=lambda p: (p.topic, p.partition))
    metrics = CleanerMetrics.of(figures, now_ms, last.at_ms if last else None, last.cleaner if last else None)
    return JobStatus(state_dir, saved.mapping, plans, now_ms, partitions, metrics.to_kafka(),
                     last.job.to_doc() if last else {}, last.group_sync if last else None, last.tables if last else (),
                     switched(state), last.at_ms if last else None)


SHOWN = 50  # rows a person reads; past this, the partitions that need a look (_notable), and --json for the rest


def _notable(p: PartitionStatus) -> bool:
    return p.state != "ok" or bool(p.ingest_lag) or bool(p.emit_lag)


def summary(status: JobStatus) -> str:
    """One line of the whole job, first: a cluster's worth of partitions is read from the top."""
    states = Counter(p.state for p in status.partitions)
    ingest = sum(p.ingest_lag or 0 for p in status.partitions)
    emit = sum(p.emit_lag or 0 for p in status.partitions)
    tables = Counter(t.state for t in status.tables)
    caught_up = status.job and all(p.state != NOT_INGESTED and p.ingest_lag == 0 and not p.emit_lag
                                   for p in status.partitions)
    return (f"{len(status.topics)} topic(s), {len(status.partitions)} partitions: "
            + ", ".join(f"{n} {state}" for state, n in sorted(states.items()))
            + f"; ingest lag {ingest:,} records, emit lag {emit:,} records"
            + (f" (caught up at the last trigger, {utc_or_dash(status.job_at_ms)} UTC)" if caught_up else "")
            + (f"; {len(status.tables)} table(s): " + ", ".join(f"{n} {state}" for state, n in sorted(tables.items()))
               if tables else ""))


def _figures(values: dict) -> str:
    return ", ".join(f"{k}={number_text(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else v}"
                     for k, v in sorted(values.items()))


def render_table(status: JobStatus) -> str:
    cols = [("partition", lambda p: f"{p.topic}-{p.partition}"), ("start", lambda p: p.log_start_offset),
            ("end", lambda p: p.log_end_offset), ("segs", lambda p: p.segments),
            ("records", lambda p: p.records), ("clean B", lambda p: p.clean_bytes),
            ("dirty B", lambda p: p.dirty_bytes), ("dirty %", lambda p: f"{100 * p.dirty_ratio:.1f}"),
            ("cleanable<", lambda p: p.first_uncleanable_offset),  # Kafka's first uncleanable offset
            ("last clean (UTC)", lambda p: utc_or_dash(p.last_clean_ms)),
            ("delay s", lambda p: f"{p.compaction_delay_ms / 1000:.1f}"),
            ("next clean (UTC)", lambda p: utc_or_dash(p.next_clean_ms)),
            ("emitted<=", lambda p: p.emitted_up_to), ("ingest lag", lambda p: p.ingest_lag),
            ("emit lag", lambda p: p.emit_lag), ("state", lambda p: p.state)]

    def cell(f, p: PartitionStatus) -> str:
        try:
            value = f(p)
        except TypeError:  # a partition not ingested yet has no log figures
            return "-"
        return "-" if value is None else str(value)

    shown = status.partitions if len(status.partitions) <= SHOWN else [p for p in status.partitions if _notable(p)]
    rows = [[cell(f, p) for _, f in cols] for p in shown[:SHOWN]]
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, (h, _) in enumerate(cols)]
    topics = sorted(status.topics.items())
    lines = [f"{status.mapping.describe()}  ({status.state_dir})", summary(status)]
    if status.switch is not None:
        lines.append(f"SWITCHED: {status.switch.summary()}; this job does not mirror again without --force")
    lines += [f"  {t} -> {plan.sink} ({plan.partitions} partitions)" for t, plan in topics] if len(topics) <= SHOWN \
        else [f"  {len(topics)} topics ({names_text([t for t, _ in topics])}) -> {status.mapping.sink_template}"]
    lines.append("  ".join(h.rjust(w) for (h, _), w in zip(cols, widths, strict=True)))
    lines += ["  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    if len(rows) < len(status.partitions):
        lines.append(f"({len(status.partitions) - len(rows)} more partitions not shown: "
                     f"{'every other is ok, ingested and emitted; ' if len(shown) <= SHOWN else ''}"
                     f"--topic narrows, --json lists every one)")
    for p in status.partitions:
        if p.held_by:
            lines.append(f"{p.topic}-{p.partition}: held: {p.held_by}: read_committed readers of {p.sink_topic}-"
                         f"{p.partition} stop there, and the job emits nothing to it until its writer ends it")
        if p.uncleanable_error:
            lines.append(f"{p.topic}-{p.partition}: {p.uncleanable_error}")
        for name, what in sorted(p.damaged_segments.items()):
            lines.append(f"{p.topic}-{p.partition}: damaged segment {name}: {what}")
    for t in status.tables:
        if t.state != TABLE_OK:
            lines.append(f"table {t.table}: {t.state} since {utc_or_dash(t.since_ms)} UTC: {t.reason}")
    lines.append("")
    lines.append("metrics: " + _figures(status.metrics))
    if status.job:
        lines.append("job: " + _figures(status.job))
    if status.group_sync:
        sync = status.group_sync
        last = "never" if sync["last-sync-ms"] is None else utc_or_dash(sync["last-sync-ms"]) + " UTC"
        lines.append(f"consumer group offset sync: last {last}, {sync['groups-synced']} groups synced, "
                     f"{sync['groups-skipped-active']} skipped as active on the sink, "
                     f"{sync['offsets-committed']} offsets committed")
    return "\n".join(lines)
