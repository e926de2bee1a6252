"""foreachBatch: append each micro-batch to the partition logs, one Spark task per source partition.

The append runs where the source reads, in the same task and process (streaming.spark.source.ingest), so
records never pass through the driver nor through Spark's JVM; only a row of counts per partition comes
back. Appends are idempotent by offset, so a micro-batch that Spark replays after a crash is skipped
record by record. Roll rules run after every append, and on triggers that bring no data the driver runs
the KIP-354 forced roll as tasks of their own, under the same lock, so an idle partition still becomes
cleanable within max.compaction.lag.ms.
"""

from __future__ import annotations

import base64
import contextlib
import functools
import json
import logging
import threading
import time
from dataclasses import asdict, astuple, dataclass, field
from typing import Callable, Iterator, Mapping

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from streaming.erasure import events as audit
from streaming.erasure.events import AuditKeys
from streaming.partition_id import PartitionId
from streaming.runtime.moments import Moment, reached
from streaming.log import LOG_BATCH_SCHEMA, LogConfig, LogFencedError, PartitionLog, encode_headers
from streaming.log.columns import validity
from streaming.log.partition_log import AppendJournal
from streaming.log.storage import Barrier
from streaming.state.locks import partition_lock
from streaming.state.layout import REJECTED, LogDir, open_partition_log, rejected_file
from streaming.state.stores import StateDir, task_state_dir
from streaming.job.append_counts import COUNTS, STATS_SCHEMA, AppendCounts
from streaming.job.engine import MicroBatch
from streaming.job import task_io
from streaming.job.task_commit import TaskCommit
from streaming.job.task import prepare_task

log = logging.getLogger(__name__)



# The source reads a partition in Arrow batches (KafkaSourceOptions.records_per_batch); they are appended in larger
# groups, since every append writes an object (a store round trip; a log's manifest is committed once, at the
# task's end); a task holds this many rows at most, over all its partitions (the largest share goes first). A crash
# before the task ends replays the batch.
APPEND_ROWS = 100_000
REQUIRED = ("offset", "timestamp", "timestampType")  # Spark's Kafka columns the log schema cannot store as null


def _b64(b: bytes | None) -> str | None:
    return None if b is None else base64.b64encode(b).decode()


def _headers(column: pa.Array) -> pa.Array:
    """Spark's headers (list<struct<key, value>>) -> each record's headers in their Avro encoding."""
    n = len(column)
    if len(column.flatten()) == 0:  # no record has a header (a null list is none)
        return pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(np.arange(n + 1, dtype=np.int32)),
                                                      pa.py_buffer(np.zeros(n, dtype=np.uint8))])
    return pa.array([encode_headers([(h["key"], h["value"]) for h in hs or []]) for hs in column.to_pylist()],
                    pa.binary())


def _storable(batch: pa.RecordBatch) -> tuple[np.ndarray, list[str | None]]:
    """(mask of rows the log can store, the reason for each row it cannot)."""
    ok = np.ones(batch.num_rows, dtype=bool)
    reasons: list[str | None] = [None] * batch.num_rows
    for name in REQUIRED:
        missing = ~validity(batch.column(name))
        for i in np.flatnonzero(missing & ok):
            reasons[i] = f"{name} is null, the log schema needs a value"
        ok &= ~missing
    keys = pc.list_flatten(batch.column("headers")).field("key") if batch.num_rows else None
    if keys is not None and keys.null_count:
        for i, hs in enumerate(batch.column("headers").to_pylist()):
            if ok[i] and any(h["key"] is None for h in hs or []):
                reasons[i] = "a header has a null key, the log schema needs a string"
                ok[i] = False
    return ok, reasons


def log_batch(batch: pa.RecordBatch) -> pa.RecordBatch:
    """Spark's Kafka columns (all non-null where the log needs it) -> a batch of LOG_BATCH_SCHEMA, with ms
    timestamps. Only headers that are present are encoded record by record."""
    micros = batch.column("timestamp").cast(pa.int64()).to_numpy(zero_copy_only=False)
    return pa.RecordBatch.from_arrays([
        batch.column("offset").cast(pa.int64()), pa.array(micros // 1000), batch.column("timestampType").cast(pa.int32()),
        batch.column("key").cast(pa.binary()), batch.column("value").cast(pa.binary()),
        _headers(batch.column("headers")), pa.nulls(batch.num_rows, pa.int64())], schema=LOG_BATCH_SCHEMA)


def _journal(audit_keys: AuditKeys, now_ms: int) -> AppendJournal | None:
    """What an append says of the records it stores, for the erase audit."""
    return None if audit_keys is AuditKeys.OFF else functools.partial(audit.ingested, now_ms=now_ms, keys=audit_keys)


def append_reporting_rejects(plog: PartitionLog, batch: pa.RecordBatch, where: str, now_ms: int,
                             audit_keys: AuditKeys = AuditKeys.HASH) -> AppendCounts:
    """Append every row the log can take; a row it cannot is set aside in rejected/ beside the log and
    named in the job's log output. The tombstones stored are journaled for the erase audit."""
    ok, reasons = _storable(batch)
    rejected = int(len(ok) - ok.sum())
    if rejected:
        lines = []
        rows = batch.filter(pa.array(~ok))
        micros = rows.column("timestamp").cast(pa.int64()).to_pylist()
        for row, us, why in zip(rows.to_pylist(), micros, [reasons[i] for i in np.flatnonzero(~ok)], strict=True):
            log.error("%s: record at offset %s cannot be stored and was set aside in %s/: %s",
                      where, row["offset"], REJECTED, why)
            lines.append(json.dumps({"offset": row["offset"], "reason": why, "key": _b64(row["key"]),
                                     "value": _b64(row["value"]),
                                     "timestamp": None if us is None else us // 1000}) + "\n")
        first = pc.min(batch.column("offset")).as_py()
        plog.storage.put(rejected_file(plog.dir, -1 if first is None else first), "".join(lines).encode())
        batch = batch.filter(pa.array(ok))
    res = plog.append(log_batch(batch), now_ms, _journal(audit_keys, now_ms))
    if res.odd_timestamps:
        log.warning("%s: %d records have a negative timestamp or one more than message.timestamp.after.max.ms "
                    "ahead; they keep it, but their append time drives segment rolls and compaction lags",
                    where, res.odd_timestamps)
    return AppendCounts(res.appended, res.skipped, res.rolled, rejected, res.odd_timestamps)


@dataclass(frozen=True)
class AppendTask:
    """What a micro-batch's append tasks need from the driver: where the logs are, each mirrored topic's log
    config (a topic topic sync has not planned yet, the cluster being away, is kept under ``default``, so
    nothing the source read is lost), the audit's key mode and the append time."""

    state_dir: str
    configs: Mapping[str, LogConfig]
    now_ms: int
    default: LogConfig = LogConfig()
    audit_keys: AuditKeys = AuditKeys.HASH

    def config_of(self, topic: str) -> LogConfig:
        return self.configs.get(topic, self.default)

    def to_json(self) -> str:
        return json.dumps({"state_dir": self.state_dir, "now_ms": self.now_ms, "audit_keys": self.audit_keys.value,
                           "default": asdict(self.default), "configs": {t: asdict(c) for t, c in self.configs.items()}})

    @classmethod
    def from_json(cls, text: str) -> "AppendTask":
        doc = json.loads(text)
        return cls(doc["state_dir"], {t: LogConfig(**c) for t, c in doc["configs"].items()}, doc["now_ms"],
                   LogConfig(**doc["default"]), AuditKeys(doc["audit_keys"]))


def append_partitions(batches: Iterator[pa.RecordBatch], task: AppendTask) -> Iterator[pa.RecordBatch]:
    """The task body: append this Spark partition's rows (Spark's Kafka columns) to their partition logs,
    then apply roll rules; yields one STATS_SCHEMA row per partition log."""
    prepare_task()
    logs: dict[PartitionId, PartitionLog] = {}
    stats: dict[PartitionId, AppendCounts] = {}
    with contextlib.ExitStack() as locks:
        yield from _append_locked(batches, task_state_dir(task.state_dir), task.config_of, task.now_ms, logs, stats,
                                  locks, task.audit_keys)


def _partitions_of(batch: pa.RecordBatch) -> list[PartitionId]:
    """The topic-partitions a batch's rows come from. A read of one partition (the ingest source's every
    batch) is recognised without grouping, which cost more than the rest of a small batch's bookkeeping."""
    topics, parts = batch.column("topic"), batch.column("partition")
    if not topics.null_count and not parts.null_count:
        low, high = pc.min_max(parts).values()
        if low == high and pc.count_distinct(topics).as_py() == 1:
            return [PartitionId(topics[0].as_py(), low.as_py())]
    keys = pa.Table.from_batches([batch.select(["topic", "partition"])]).group_by(["topic", "partition"])
    return [PartitionId(r["topic"], r["partition"]) for r in keys.aggregate([]).to_pylist()]


def _append_locked(batches: Iterator[pa.RecordBatch], state: StateDir, config_of: Callable[[str], LogConfig],
                   now_ms: int, logs: dict, stats: dict, locks: contextlib.ExitStack,
                   audit_keys: AuditKeys) -> Iterator[pa.RecordBatch]:
    pending: dict[PartitionId, list[pa.RecordBatch]] = {}
    held: dict[PartitionId, int] = {}  # the rows pending holds, by log: a task reads hundreds of partitions
    holding = 0  # their sum, kept as rows come and go (a sum at every batch is quadratic in the partitions)
    commit = TaskCommit(locks.enter_context(Barrier()), task_io.threads_for(state.local))
    opened_at: dict[PartitionId, int] = {}  # each log's end as the task opened it

    def flush(pid: PartitionId) -> None:
        nonlocal holding
        if pid not in logs:
            where = LogDir.of(state, pid)
            locks.enter_context(partition_lock(state, where.directory))
            logs[pid] = open_partition_log(state, where, config_of(pid.topic), commit.barrier)
            logs[pid].hold_commits()  # one manifest a log for the task, made behind its barrier
            opened_at[pid] = logs[pid].log_end_offset
        holding -= held.pop(pid)
        parts = pending.pop(pid)
        rows = parts[0] if len(parts) == 1 else pa.Table.from_batches(parts).combine_chunks().to_batches()[0]
        reached(Moment.APPEND, str(pid))
        stats[pid] = stats.get(pid, AppendCounts()) + append_reporting_rejects(logs[pid], rows, str(pid), now_ms,
                                                                               audit_keys)

    for batch in batches:
        if batch.num_rows == 0:
            continue
        pids = _partitions_of(batch)
        for pid in pids:
            rows = batch if len(pids) == 1 else batch.filter(
                pc.and_(pc.equal(batch.column("topic"), pid.topic), pc.equal(batch.column("partition"), pid.partition)))
            pending.setdefault(pid, []).append(rows)
            held[pid] = held.get(pid, 0) + rows.num_rows
            holding += rows.num_rows
            if holding >= APPEND_ROWS:  # a task reads many partitions: what it holds stays bounded
                flush(max(held, key=held.__getitem__))
    for pid in list(pending):
        flush(pid)
    for pid, plog in logs.items():
        if plog.maybe_roll(now_ms):
            stats[pid].rolled += 1
    failed = commit(list(logs.values()))
    for pid, plog in list(logs.items()):
        exc = failed.get(plog)
        if exc is None:
            continue
        if not isinstance(exc, LogFencedError):
            raise exc  # the task fails, and Spark runs it again: its appends are idempotent
        log.warning("%s; reopening it to append again", exc)  # another writer appended since
        logs[pid] = _appended_again(plog, open_partition_log(state, LogDir.of(state, pid), config_of(pid.topic)),
                                    opened_at[pid], now_ms, audit_keys)
    commit.barrier.cross()  # before the micro-batch's offsets are committed, which say its records are in the logs
    if stats:
        pids = list(stats)
        yield pa.RecordBatch.from_arrays(
            [pa.array([pid.topic for pid in pids], pa.string()), pa.array([pid.partition for pid in pids], pa.int32()),
             *(pa.array([getattr(stats[pid], c) for pid in pids], pa.int64()) for c in COUNTS),
             pa.array([logs[pid].log_end_offset for pid in pids], pa.int64())], schema=STATS_SCHEMA)


def _appended_again(fenced: PartitionLog, plog: PartitionLog, start: int, now_ms: int,
                    audit_keys: AuditKeys) -> PartitionLog:
    """The records a fenced writer appended (read back from the objects it wrote, which no manifest names) in
    ``plog``, the log as the other writer left it: what that one appended already is skipped."""
    journal = _journal(audit_keys, now_ms)
    for batch in fenced.read_batches(start):
        plog.append(batch, now_ms, journal)
    plog.maybe_roll(now_ms)
    return plog


@dataclass
class BatchStats(AppendCounts):
    batch_id: int = -1
    partitions: int = 0


@dataclass
class LogAppender:
    """The foreachBatch handler. Holds the driver-side lock that keeps appends and compaction stages apart."""

    state_dir: str
    configs: Mapping[str, LogConfig]  # by source topic; the runner hands in new ones as topic sync adds topics
    default: LogConfig = LogConfig()  # for a topic not planned yet
    audit_keys: AuditKeys = AuditKeys.HASH  # erase.audit.keys (a job setting: one for every topic)
    clock: Callable[[], float] = time.time
    lock: threading.RLock = field(default_factory=threading.RLock)
    last_batch: BatchStats | None = None
    last_changed: dict[PartitionId, int] = field(default_factory=dict)  # logs the batch changed: records (a roll: 1)
    last_ends: dict[PartitionId, int] = field(default_factory=dict)  # where the logs the batch read end
    batches: int = 0

    def __call__(self, batch: MicroBatch, batch_id: int) -> None:
        task = AppendTask(self.state_dir, dict(self.configs), int(self.clock() * 1000), self.default, self.audit_keys)
        with self.lock:
            log.debug("phase: append batch %d", batch_id)
            rows = batch.append(task)
        total = sum((r.counts for r in rows), AppendCounts())
        stats = BatchStats(*astuple(total), batch_id=batch_id, partitions=len(rows))
        self.last_batch = stats
        self.last_changed = {PartitionId(r.topic, r.partition): r.counts.appended + r.counts.rolled for r in rows
                             if r.counts.appended or r.counts.rolled}
        self.last_ends = {PartitionId(r.topic, r.partition): r.log_end_offset for r in rows}
        self.batches += 1
        log.info("batch %d: %d partitions, %d records appended, %d replayed, %d rolls, %d rejected, "
                 "%d with out-of-range timestamps", batch_id, stats.partitions, stats.appended, stats.skipped,
                 stats.rolled, stats.rejected, stats.odd_timestamps)
