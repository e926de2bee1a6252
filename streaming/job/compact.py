"""The compaction stage: for one partition, roll, clean what is eligible, emit what the passes kept.

Runs as one Spark task per partition. It cleans, pass after pass while the offset map fills up and the
partition stays eligible, then emits everything cleaned that the sink has not received: the passes'
survivors, and whatever earlier stages cleaned but did not emit (a crash between a pass and its
emission). Emission progress comes from the sink itself (see streaming.kafka.emitter), so the stage is
safe to repeat at any point.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
from dataclasses import dataclass, field
from functools import lru_cache

from streaming.cleaner import (Cleaner, CompactionConfig, KeylessPolicy, LogCleanerManager, LogToClean, NextClean,
                               PartitionCleanerState, PartitionFigures, log_to_clean, next_clean, quiet_until)
from streaming.erasure.entries import deadline_ms
from streaming.erasure.events import AuditKeys
from streaming.partition_id import PartitionId
from streaming.job.erase_audit import count_overdue, note_emission, recover_lost_notes
from streaming.job.spec import JobSpec
from streaming.job.task_error import ErrorKind, TaskError
from streaming.log import PartitionLog
from streaming.state.locks import partition_lock
from streaming.kafka.emitter import HangingTransaction, PartitionEmitter, TransactionInterrupted, read_progress
from streaming.kafka.native import NativePathError
from streaming.log.storage import read_json, write_json
from streaming.state.layout import LogDir, emitted_file, open_partition_log
from streaming.state.stores import StateDir, open_state_dir
from streaming.job.task import prepare_task

log = logging.getLogger(__name__)

EMIT_ATTEMPTS = 3  # tries within one stage to emit past transactions the emitter abandoned


@dataclass
class StageReport:
    """What one partition's task hands back to the driver."""

    pid: PartitionId
    rolled: bool = False
    emitted: int = 0
    emitted_up_to: int = -1
    log_end_offset: int = 0
    tombstones_removed: int = 0
    error: TaskError | None = None
    figures: PartitionFigures = field(default_factory=PartitionFigures)
    waiting: NextClean | None = None  # when no pass could run: when the oldest dirty record can be cleaned
    erase_log_ms: list[int] = field(default_factory=list)   # per tombstone erased from the log this stage:
    erase_sink_ms: list[int] = field(default_factory=list)  # and per one committed to the sink, ms since its timestamp
    erasures_overdue: int = 0
    # Until when the partition needs no task if no record arrives (None: the next stage runs it); see quiet_until
    quiet_until_ms: int | None = None

    def carried(self) -> "StageReport":
        """This report as a stage that leaves the log alone hands it back: its state, none of its work."""
        return dataclasses.replace(self, rolled=False, emitted=0, tombstones_removed=0, erase_log_ms=[], erase_sink_ms=[],
                                   figures=dataclasses.replace(self.figures, passes=0, clean_secs=0.0, bytes_read=0,
                                                               bytes_written=0, buffer_utilization=0.0))

    def observe(self, plog: PartitionLog, target: LogToClean, state: PartitionCleanerState,
                config: CompactionConfig) -> None:
        self.figures = self.figures.observed(target, state)
        self.waiting = next_clean(plog.segments, target, config)


@lru_cache(maxsize=2)
def _cleaner(config: CompactionConfig) -> Cleaner:
    """One offset map per Python worker, reused across tasks, as a Kafka cleaner thread keeps its own."""
    return Cleaner(config)


def _emit_up_to(plog: PartitionLog, emitter: PartitionEmitter, end: int) -> int:
    """Emits the log below ``end``. A transaction the emitter abandoned (a sink outage, a fatal producer
    error) is emitted again from the committed progress, a few times, before the failure is left to the
    next trigger."""
    before = emitter.committed_records
    attempt = 1
    while True:
        try:
            emitter.emit(plog.read_batches(emitter.emitted_up_to + 1, end))
            return emitter.committed_records - before
        except TransactionInterrupted as exc:
            if attempt == EMIT_ATTEMPTS:
                raise
            log.warning("%s (attempt %d of %d)", exc, attempt, EMIT_ATTEMPTS)
            attempt += 1


def _clean_and_emit(plog: PartitionLog, emitter: PartitionEmitter, spec: JobSpec, config: CompactionConfig,
                    now_ms: int, report: StageReport) -> None:
    """Every pass the partition is due, then one emission of what they left: a record that a later pass of
    this stage removes (the dedupe buffer could not hold all keys at once) never reaches the sink. What the
    passes cleaned is committed with the log, and emission resumes from the sink's progress, so a crash
    between the passes and the emission loses nothing: the next stage emits it."""
    manager = LogCleanerManager(config, _cleaner(config))
    dead_letter = functools.partial(emitter.dead_letter, spec.dead_letter_topic) \
        if config.keyless_policy is KeylessPolicy.DEAD_LETTER and spec.dead_letter_topic else None
    pid = report.pid
    for _ in range(spec.max_passes_per_trigger):
        log.debug("phase: clean %s", pid)
        outcome = manager.clean_partition(pid, plog, now_ms, dead_letter=dead_letter)
        report.observe(plog, outcome.target, outcome.state, config)
        report.error = None if outcome.cause is None else TaskError.of(outcome.cause)
        result = outcome.result
        if result is None:
            break
        report.figures = report.figures.with_pass(result)
        report.tombstones_removed += result.tombstones_removed
        report.erase_log_ms.extend(e.at - e.timestamp for e in result.erased)
        if not result.map_full:
            break
    checkpoint = plog.cleaner_checkpoint
    if checkpoint is not None and checkpoint > emitter.emitted_up_to + 1:
        log.debug("phase: emit %s [%d, %d)", pid, emitter.emitted_up_to + 1, checkpoint)
        emitted = _emit_up_to(plog, emitter, checkpoint)
        report.emitted += emitted
        log.debug("%s: emitted %d records", pid, emitted)
    report.log_end_offset = plog.log_end_offset


def _local_emitted(plog: PartitionLog) -> int | None:
    doc = read_json(plog.storage, emitted_file(plog.dir))
    return None if doc is None else doc["emitted_up_to"]


def _idle(plog: PartitionLog, emitted: int | None, config: CompactionConfig, now_ms: int,
          report: StageReport) -> bool:
    """True when this partition needs no pass and has nothing cleaned-but-unemitted, so the sink need not
    be touched. Emission progress is the sink's; the local note of it (``emitted``, written after each
    commit) only serves to skip: a stale note makes the stage look at the sink once too often, never skip a
    record."""
    if emitted is None:
        return False
    state = PartitionCleanerState.load(plog.storage, plog.dir)
    if plog.damaged and not state.in_backoff(now_ms):
        return False
    if _owes_sink(plog, emitted):
        return False
    target = log_to_clean(plog.segments, report.pid, plog.cleaner_checkpoint, config, now_ms)
    report.observe(plog, target, state, config)
    report.emitted_up_to = emitted
    return state.in_backoff(now_ms) or not target.eligible(config.min_cleanable_dirty_ratio)


def _owes_sink(plog: PartitionLog, emitted: int) -> bool:
    """The passes kept records past ``emitted`` that the sink has not received."""
    checkpoint = plog.cleaner_checkpoint
    return checkpoint is not None and any(s.last_offset is not None and s.last_offset > emitted
                                          and s.base_offset < checkpoint for s in plog.segments)


def _quiet_until(plog: PartitionLog, report: StageReport, config: CompactionConfig, now_ms: int) -> int | None:
    """Until when the partition needs no task if no record arrives: never while it failed or owes the sink;
    a damaged log until its backoff ends; else the cleaner's quiet_until."""
    if report.error is not None or report.emitted_up_to < 0 or _owes_sink(plog, report.emitted_up_to):
        return None
    if plog.damaged:
        state = PartitionCleanerState.load(plog.storage, plog.dir)
        return state.retry_at_ms if state.in_backoff(now_ms) else None
    target = log_to_clean(plog.segments, report.pid, plog.cleaner_checkpoint, config, now_ms)
    return quiet_until(plog.segments, target, config, now_ms)


def idle_report(state: StateDir, log_dir: LogDir, spec: JobSpec, now_ms: int, drain: bool, sink_unchanged: bool
                ) -> StageReport | None:
    """The report of a stage that would do nothing for this partition now: no forced roll due (``drain``:
    an empty active segment, since a drain rolls any other), nothing cleanable, and the sink holding
    everything cleaned (``sink_unchanged``: the sink ends where the last stage left it (job.sink_ends), so the
    log's note of emission holds; else its last record is read); None when the stage has work. It rolls,
    cleans and emits nothing (opening the log collects its garbage, as any opening does), so a --once run
    that finds every partition idle and nothing new to read can end without an engine."""
    plan = spec.topics[log_dir.pid.topic]
    with partition_lock(state, log_dir.directory):
        plog = open_partition_log(state, log_dir, plan.compaction.log_config)
        report = StageReport(log_dir.pid, log_end_offset=plog.log_end_offset)
        if (not plog.active.empty if drain else plog.forced_roll_due(now_ms)) or \
                not _idle(plog, _local_emitted(plog), _stage_config(plan.compaction, drain), now_ms, report):
            return None
        if not sink_unchanged:
            try:
                progress = read_progress({"bootstrap.servers": spec.sink_bootstrap, **spec.sink_kafka}, plan.sink,
                                         log_dir.pid.partition)
            except Exception:  # noqa: BLE001 (the stage itself reports a sink that is away, and waits for it)
                return None
            if progress != report.emitted_up_to:
                return None
        _count_overdue(plog, report, spec, now_ms)
        return report


def compact_partition(log_dir: LogDir, spec: JobSpec, now_ms: int, sink_read: frozenset[PartitionId],
                      drain: bool = False) -> StageReport:
    """``sink_read``: the partitions whose progress this run has read from the sink. The others ask the
    sink even when the local note says nothing is owed, so a sink emptied or re-created while the job was
    down is filled again."""
    prepare_task([spec.source_kafka, spec.sink_kafka])
    state = open_state_dir(spec.state_dir)
    with partition_lock(state, log_dir.directory):
        config = spec.topics[log_dir.pid.topic].compaction
        plog = open_partition_log(state, log_dir, config.log_config)
        report = _roll_clean_emit(plog, log_dir, spec, now_ms, log_dir.pid in sink_read, drain)
        _count_overdue(plog, report, spec, now_ms)
        report.quiet_until_ms = _quiet_until(plog, report, _stage_config(config, drain), now_ms)
        return report


def compact_partitions(log_dirs: list[LogDir], spec: JobSpec, now_ms: int, sink_read: frozenset[PartitionId],
                       drain: bool = False) -> list[StageReport]:
    """One Spark task's share of a stage: many small logs share a task (streaming.job.stage_plan), so a
    stage over thousands of partitions is not thousands of tasks."""
    return [compact_partition(d, spec, now_ms, sink_read, drain) for d in log_dirs]


def _stage_config(config: CompactionConfig, drain: bool) -> CompactionConfig:
    return config.drained() if drain else config


def _count_overdue(plog: PartitionLog, report: StageReport, spec: JobSpec, now_ms: int) -> None:
    config = spec.topics[report.pid.topic].compaction
    if config.erase_audit_keys is not AuditKeys.OFF:
        local = None if report.emitted_up_to >= 0 else _local_emitted(plog)  # the sink's word first
        emitted = report.emitted_up_to if local is None else local
        report.erasures_overdue = count_overdue(
            plog, emitted, deadline_ms(config.max_compaction_lag_ms, spec.trigger_interval_ms), now_ms)


def _roll_clean_emit(plog: PartitionLog, log_dir: LogDir, spec: JobSpec, now_ms: int, trust_local: bool,
                       drain: bool) -> StageReport:
    topic, partition = log_dir.pid.topic, log_dir.pid.partition
    report = StageReport(log_dir.pid)
    plan = spec.topics[topic]
    config = _stage_config(plan.compaction, drain)
    auditing = config.erase_audit_keys is not AuditKeys.OFF
    report.rolled = plog.roll() if drain else plog.maybe_roll(now_ms)
    report.log_end_offset = plog.log_end_offset
    noted = _local_emitted(plog)
    if trust_local and _idle(plog, noted, config, now_ms, report):
        return report
    try:
        emitter = PartitionEmitter(spec.sink_bootstrap, plan.sink, partition, spec.sink_kafka, source_topic=topic,
                                   noted=noted, transaction_records=config.emit_transaction_records,
                                   kafka_native=spec.kafka_native)
    except (HangingTransaction, NativePathError) as exc:  # the operator must end it: emitting over it would commit
        report.error = TaskError.of(exc)  # it; or kcompact's own defect: neither is the sink away
        return report
    except Exception as exc:  # noqa: BLE001 (sink unreachable: nothing is cleaned unseen; the next trigger tries again)
        report.error = TaskError.of(exc, ErrorKind.SINK_UNREACHABLE)
        return report
    try:
        if auditing:
            recover_lost_notes(plog, emitter, spec, plan)
        _clean_and_emit(plog, emitter, spec, config, now_ms, report)
    except Exception as exc:  # noqa: BLE001 (a pass or an emission failed mid-way: the sink's own progress says where to resume)
        report.error = TaskError.of(exc)
    finally:
        report.emitted_up_to = emitter.emitted_up_to
        report.erase_sink_ms.extend(d.at_ms - d.timestamp_ms for d in emitter.tombstones)
        emitter.close()
    if auditing:
        try:
            note_emission(plog, emitter)
        except Exception as exc:  # noqa: BLE001 (the next stage finds the range unnoted and makes it good)
            report.error = report.error or TaskError.of(exc)
    write_json(plog.storage, emitted_file(log_dir.directory), {"emitted_up_to": report.emitted_up_to, "at_ms": now_ms})
    return report
