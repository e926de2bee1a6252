"""The job's metrics: one document per trigger, written to the state dir and served to Prometheus.

The document is the single source: `kcompact status` reads it from metrics.json when the job is down,
and the Prometheus collector renders the latest one on each scrape, so the two never disagree.
Cleaner gauges keep Kafka's names (kafka.log:type=LogCleaner / LogCleanerManager, dashes made
underscores); the rest says how far ingest and emission are behind, per partition.
"""

from __future__ import annotations

import bisect
import itertools
import threading
from dataclasses import asdict, dataclass, field, fields, replace
from typing import TYPE_CHECKING, Iterator, Mapping

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector, CollectorRegistry

from streaming.cleaner import CleanerMetrics
from streaming.errors import JobError
from streaming.partition_id import PartitionId
from streaming.log.storage import read_json, write_json
from streaming.state.layout import metrics_file
from streaming.state.stores import StateDir

if TYPE_CHECKING:  # the report type only: status reads these documents without the stage's Kafka imports
    from streaming.job.compact import StageReport

PREFIX = "kcompact"

KAFKA_MBEANS = {
    "max-dirty-percent": "kafka.log:type=LogCleanerManager,name=max-dirty-percent",
    "time-since-last-run-ms": "kafka.log:type=LogCleanerManager,name=time-since-last-run-ms",
    "uncleanable-partitions-count": "kafka.log:type=LogCleanerManager,name=uncleanable-partitions-count",
    "uncleanable-bytes": "kafka.log:type=LogCleanerManager,name=uncleanable-bytes",
    "max-compaction-delay-secs": "kafka.log:type=LogCleaner,name=max-compaction-delay-secs",
    "max-clean-time-secs": "kafka.log:type=LogCleaner,name=max-clean-time-secs",
    "cleaner-recopy-percent": "kafka.log:type=LogCleaner,name=cleaner-recopy-percent",
    "max-buffer-utilization-percent": "kafka.log:type=LogCleaner,name=max-buffer-utilization-percent",
}
CLEANER_COUNTERS = {"keyless-records", "dead-letter-records", "invalid-version-headers"}


def _counter(name: str, help_text: str):
    return field(default=0, metadata={"name": name, "help": help_text})


@dataclass
class JobCounters:
    """The job's running totals since it started: metrics.json's "job" section and a Prometheus counter
    each, named and explained here once."""

    batches: int = _counter("batches", "micro-batches appended")
    ingested: int = _counter("records-ingested", "records appended to the logs")
    rejected: int = _counter("records-rejected", "records the log could not store (see rejected.jsonl)")
    odd_timestamps: int = _counter("records-timestamp-out-of-range",
                                   "records timestamped below 0 or beyond message.timestamp.after.max.ms: their "
                                   "append time is used for lags")
    stages: int = _counter("stages", "compaction stages run")
    stage_tasks: int = _counter("stage-tasks", "Spark tasks the compaction stages ran (many logs share one)")
    logs_left_alone: int = _counter("logs-left-alone", "partition logs a stage gave no task: nothing new, owing the "
                                                       "sink nothing, no pass or roll due")
    passes: int = _counter("passes", "cleaning passes")
    emitted: int = _counter("records-emitted", "records produced to the sink")

    def to_doc(self) -> dict[str, int]:
        return {f.metadata["name"]: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_doc(cls, doc: Mapping[str, int]) -> "JobCounters":
        return cls(**{f.name: doc.get(f.metadata["name"], 0) for f in fields(cls)})


JOB_COUNTERS = {f.metadata["name"]: f.metadata["help"] for f in fields(JobCounters)}
GROUP_SYNC = {  # --sync-group-offsets (streaming.kafka.groups.group_sync)
    "rounds": ("counter", "consumer group offset sync rounds done"),
    "offsets-committed": ("counter", "group offsets committed on the sink cluster"),
    "groups-synced": ("gauge", "groups whose sink offsets follow the source, at the last round"),
    "groups-skipped-active": ("gauge", "groups left alone at the last round: they have members on the sink"),
    "last-sync-ms": ("gauge", "when the last round ended, in ms since the epoch"),
}
PARTITION_GAUGES = {
    "log_end_offset": "next offset the compactor's log expects",
    "source_end_offset": "source partition's high watermark at the last trigger",
    "ingest_lag": "offsets in the source not yet in the log (source end - log end)",
    "emitted_up_to": "last source offset committed to the sink",
    "emit_lag": "offsets in the log beyond the last emitted one (log end - 1 - emitted)",
    "dirty_ratio": "cleanable bytes / all bytes past the log start",
    "compaction_delay_seconds": "how far past max.compaction.lag.ms the oldest dirty record is",
    "uncleanable": "1 when the partition is uncleanable (see kcompact status)",
    "erasures_overdue": "tombstones past max.compaction.lag.ms plus one trigger whose key's earlier records are "
                        "still in the log or that are not yet in the sink (see kcompact erasures --overdue)",
    "held_seconds": "how long another writer's transaction, left open on the sink partition, has held its "
                    "emission (absent: none holds it; see kcompact status)",
}
# Erase latency buckets, in seconds: from a second to a week (max.compaction.lag.ms is often a day or a week)
ERASE_BUCKETS_S = (1.0, 5.0, 15.0, 60.0, 300.0, 900.0, 3600.0, 4 * 3600.0, 86400.0, 7 * 86400.0)
ERASE_LATENCY = {"log": "until no earlier record of the key is left in the compactor's log",
                 "sink": "until the tombstone is committed to the sink"}


@dataclass
class EraseLatency:
    """Seconds from a tombstone's timestamp to its erasure (from the log, into the sink), as Prometheus
    histograms, since the job started: metrics.json's "erase_latency" section."""

    buckets: dict[str, list[int]] = field(default_factory=lambda: {u: [0] * (len(ERASE_BUCKETS_S) + 1)
                                                                   for u in ERASE_LATENCY})
    sums_s: dict[str, float] = field(default_factory=lambda: dict.fromkeys(ERASE_LATENCY, 0.0))

    def observe(self, until: str, latencies_ms: list[int]) -> None:
        for ms in latencies_ms:
            s = max(ms, 0) / 1000
            self.buckets[until][bisect.bisect_left(ERASE_BUCKETS_S, s)] += 1
            self.sums_s[until] += s

    def to_doc(self) -> dict:
        return {u: {"buckets": list(self.buckets[u]), "sum_s": self.sums_s[u]} for u in ERASE_LATENCY}

    @classmethod
    def from_doc(cls, doc: Mapping[str, Mapping]) -> "EraseLatency":
        return cls({u: list(h["buckets"]) for u, h in doc.items()}, {u: h["sum_s"] for u, h in doc.items()})


def ingest_lag(source_end: int | None, log_end: int) -> int | None:
    """Source offsets not yet in the log; unknown while the source's end is."""
    return None if source_end is None else max(0, source_end - log_end)


def emit_lag(log_end: int, emitted_up_to: int | None) -> int | None:
    """Log offsets past the last emitted one (an upper bound: superseded records are never emitted)."""
    return None if emitted_up_to is None else max(0, log_end - 1 - emitted_up_to)


@dataclass(frozen=True)
class PartitionProgress:
    """One partition's lags at a trigger, from its compaction-stage report and the source's high watermark;
    each field is a Prometheus gauge (PARTITION_GAUGES)."""

    topic: str
    partition: int
    log_end_offset: int
    source_end_offset: int | None
    ingest_lag: int | None
    emitted_up_to: int | None
    emit_lag: int | None
    dirty_ratio: float
    compaction_delay_seconds: float
    uncleanable: int
    erasures_overdue: int
    held_seconds: float | None = None
    held_at: int | None = None  # the sink offset where the transaction holding it begins

    @property
    def pid(self) -> PartitionId:
        return PartitionId(self.topic, self.partition)

    @classmethod
    def of(cls, report: StageReport, source_end: int | None, now_ms: int) -> "PartitionProgress":
        log_end, emitted, figures = report.log_end_offset, report.emitted_up_to, report.figures
        held = report.open_transaction if report.open_transaction and report.open_transaction.another_writers else None
        return cls(report.pid.topic, report.pid.partition, log_end, source_end, ingest_lag(source_end, log_end),
                   emitted, emit_lag(log_end, emitted), figures.cleanable_ratio, figures.compaction_delay_ms / 1000,
                   int(figures.uncleanable), report.erasures_overdue,
                   None if held is None else (now_ms - held.since_ms) / 1000, None if held is None else held.start)


@dataclass(frozen=True)
class TableState:
    """A table kept in step by the job (--snapshot-every): ok, BLOCKED by a type change at the source until
    it is resolved (docs/cdc.md), or FAILING for another reason (a catalog away), since when and why."""

    table: str
    state: str
    since_ms: int | None = None
    reason: str | None = None


TABLE_OK, TABLE_BLOCKED, TABLE_FAILING = "ok", "BLOCKED", "FAILING"  # TableState.state
TABLE_GAUGES = {TABLE_BLOCKED: ("table-blocked", "1 while a type change at the source stops the table's snapshots "
                                             "(see kcompact status)"),
                TABLE_FAILING: ("table-failing", "1 while the table's snapshots fail for another reason")}


@dataclass(frozen=True)
class MetricsDocument:
    """What the job knew at its last trigger: metrics.json, and what the Prometheus endpoint renders."""

    at_ms: int
    cleaner: CleanerMetrics
    job: JobCounters
    partitions: tuple[PartitionProgress, ...] = ()
    erase_latency: EraseLatency = field(default_factory=EraseLatency)
    group_sync: Mapping[str, int | None] | None = None  # GROUP_SYNC's figures, with --sync-group-offsets
    tables: tuple[TableState, ...] = ()  # with --snapshot-every

    @classmethod
    def of(cls, now_ms: int, cleaner: CleanerMetrics, job: JobCounters, reports: list[StageReport],
           source_ends: Mapping[PartitionId, int], group_sync: Mapping[str, int | None] | None = None,
           erase_latency: EraseLatency | None = None, tables: tuple[TableState, ...] = ()) -> "MetricsDocument":
        """A snapshot: the running totals are copied, so the document stays as it was when written."""
        latency = EraseLatency.from_doc((erase_latency or EraseLatency()).to_doc())
        return cls(now_ms, cleaner, replace(job), tuple(PartitionProgress.of(r, source_ends.get(r.pid), now_ms)
                                                         for r in reports),
                   latency, None if group_sync is None else dict(group_sync), tables)

    def to_doc(self) -> dict:
        doc = {"at_ms": self.at_ms, "cleaner": self.cleaner.to_kafka(), "job": self.job.to_doc(),
               "partitions": [asdict(p) for p in self.partitions], "erase_latency": self.erase_latency.to_doc(),
               **({"tables": [asdict(t) for t in self.tables]} if self.tables else {})}
        return doc if self.group_sync is None else {**doc, "group_sync": dict(self.group_sync)}

    @classmethod
    def from_doc(cls, doc: Mapping) -> "MetricsDocument":
        return cls(doc["at_ms"], CleanerMetrics.from_kafka(doc["cleaner"]), JobCounters.from_doc(doc["job"]),
                   tuple(PartitionProgress(**p) for p in doc["partitions"]),
                   EraseLatency.from_doc(doc["erase_latency"]), doc.get("group_sync"),
                   tuple(TableState(**t) for t in doc.get("tables", ())))


def write_doc(state: StateDir, document: MetricsDocument) -> None:
    write_json(state.storage, metrics_file(state), document.to_doc())


def update_group_sync(state: StateDir, group_sync: Mapping[str, int | None]) -> None:
    """A group sync round that ran after the last trigger's document (--once) goes into it."""
    document = read_doc(state)
    if document is not None:
        write_doc(state, replace(document, group_sync=dict(group_sync)))


def update_tables(state: StateDir, tables: tuple[TableState, ...]) -> MetricsDocument | None:
    """The tables' states after a snapshot round, which runs after the stage's document was written."""
    document = read_doc(state)
    if document is None or document.tables == tables:
        return document
    document = replace(document, tables=tables)
    write_doc(state, document)
    return document


def read_doc(state: StateDir) -> MetricsDocument | None:
    """The last trigger's document; None before the job's first trigger."""
    doc = read_json(state.storage, metrics_file(state))
    return None if doc is None else MetricsDocument.from_doc(doc)


def _name(kafka_name: str) -> str:
    return f"{PREFIX}_{kafka_name.replace('-', '_')}"


class JobMetricsCollector(Collector):
    """Renders the latest document; the job hands it a new one each trigger."""

    def __init__(self) -> None:
        self._doc: MetricsDocument | None = None
        self._lock = threading.Lock()

    def update(self, document: MetricsDocument) -> None:
        with self._lock:
            self._doc = document

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            doc = self._doc
        if doc is None:
            return
        for name, value in doc.cleaner.to_kafka().items():
            help_text = KAFKA_MBEANS.get(name, f"cleaner {name} (kcompact)")
            if name in CLEANER_COUNTERS:
                yield CounterMetricFamily(_name(f"cleaner-{name}"), help_text, value=value)
            else:
                yield GaugeMetricFamily(_name(f"cleaner-{name}"), help_text, value=value)
        for name, value in doc.job.to_doc().items():
            yield CounterMetricFamily(_name(name), JOB_COUNTERS[name], value=value)
        for name, value in (doc.group_sync or {}).items():
            if value is not None:
                kind, help_text = GROUP_SYNC[name]
                family = CounterMetricFamily if kind == "counter" else GaugeMetricFamily
                yield family(_name(f"group-sync-{name}"), help_text, value=value)
        for gauge, help_text in PARTITION_GAUGES.items():
            family = GaugeMetricFamily(_name(f"partition-{gauge}"), help_text, labels=["topic", "partition"])
            for p in doc.partitions:
                if getattr(p, gauge) is not None:
                    family.add_metric([p.topic, str(p.partition)], getattr(p, gauge))
            yield family
        for state, (name, help_text) in TABLE_GAUGES.items():
            family = GaugeMetricFamily(_name(name), help_text, labels=["table"])
            for t in doc.tables:
                family.add_metric([t.table], int(t.state == state))
            yield family
        latency = HistogramMetricFamily(_name("erase-latency-seconds"), "seconds from a tombstone's timestamp to "
                                        "its erasure: until=log, " + ERASE_LATENCY["log"] + "; until=sink, " +
                                        ERASE_LATENCY["sink"], labels=["until"])
        for until, h in doc.erase_latency.to_doc().items():
            cumulative = list(itertools.accumulate(h["buckets"]))
            bounds = [*(str(b) for b in ERASE_BUCKETS_S), "+Inf"]
            latency.add_metric([until], list(zip(bounds, cumulative, strict=True)), h["sum_s"])
        yield latency


def serve(collector: JobMetricsCollector, port: int, host: str) -> None:
    """The Prometheus endpoint on a daemon thread (it lives as long as the job)."""
    from prometheus_client import start_http_server  # noqa: PLC0415 (only when --metrics-port is given)

    registry = CollectorRegistry()
    registry.register(collector)
    try:
        start_http_server(port, addr=host, registry=registry)
    except OSError as exc:
        raise JobError(f"cannot serve metrics on {host}:{port}: {exc.strerror or exc}") from exc
