"""The compaction stage, one partition log at a time: roll, clean what is eligible, and say what the log owes the
sink. A task's logs are opened and emitted together (streaming.job.stage_task, streaming.job.emission).

Many small logs share a task (streaming.job.stage_plan). Each log is cleaned pass after pass while the offset
map fills up and the partition stays eligible, then everything cleaned that the sink has not received is
emitted: the passes' survivors, and whatever earlier stages cleaned but did not emit (an emission that failed
or was cut short). Emission progress comes from the sink itself, so the stage is safe to repeat at any point.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Callable, Mapping

from streaming.cleaner import (Cleaner, CompactionConfig, LogCleanerManager, LogToClean, NextClean,
                               PartitionCleanerState, PartitionFigures, log_to_clean, next_clean, quiet_until)
from streaming.erasure.entries import deadline_ms
from streaming.erasure.events import AuditKeys
from streaming.partition_id import PartitionId
from streaming.runtime.moments import Moment, reached
from streaming.job.emission_note import EmissionNote, emission_note
from streaming.job.erase_audit import count_overdue
from streaming.job.spec import JobSpec, TopicPlan
from streaming.job.task_error import TaskError
from streaming.log import PartitionLog
from streaming.log.record import LogRecord
from streaming.state.locks import partition_lock
from streaming.job.held_sinks import OpenTransaction
from streaming.kafka.sink.sink_state import SinkPartitionState
from streaming.state.layout import LogDir, open_partition_log
from streaming.state.stores import StateDir

log = logging.getLogger(__name__)


@dataclass
class StageReport:
    """What one partition's share of a task hands back to the driver."""

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
    attempt: int = 0  # the task's attempt (Spark's): above 0, an earlier attempt may still be writing
    # the sink partition's topic id and high watermark as its task read them after its fence (None: not read)
    sink_seen: tuple[str, int] | None = None
    open_transaction: OpenTransaction | None = None  # found on its sink partition, and emission held for it

    def carried(self) -> "StageReport":
        """This report as a stage that leaves the log alone hands it back: its state, none of its work."""
        return dataclasses.replace(self, rolled=False, emitted=0, tombstones_removed=0, erase_log_ms=[], erase_sink_ms=[],
                                   figures=dataclasses.replace(self.figures, passes=0, clean_secs=0.0, bytes_read=0,
                                                               bytes_written=0, buffer_utilization=0.0),
                                   attempt=0, sink_seen=None)

    def observe(self, plog: PartitionLog, target: LogToClean, state: PartitionCleanerState,
                config: CompactionConfig) -> None:
        self.figures = self.figures.observed(target, state)
        self.waiting = next_clean(plog.segments, target, config)


@dataclass(frozen=True)
class StageTask:
    """One compaction task's share of a stage, as the driver hands it out."""

    logs: tuple[LogDir, ...]
    slot: int  # its transactional id's (streaming.kafka.sink.transactional_ids)
    # by sink partition: the sinks as the driver read them after any fencing (None: they did not answer it)
    sinks: Mapping[PartitionId, SinkPartitionState] | None
    # by source partition, where its sink is as the job's last stage left it: what the sink committed of it
    trusted: Mapping[PartitionId, int] = field(default_factory=dict)
    held: Mapping[PartitionId, OpenTransaction] = field(default_factory=dict)  # another writer's is open there
    fences: int = 0  # how many times the driver had fenced the job's ids when it made this task


@lru_cache(maxsize=2)
def _cleaner(config: CompactionConfig) -> Cleaner:
    """One offset map per Python worker, reused across tasks, as a Kafka cleaner thread keeps its own."""
    return Cleaner(config)


DeadLetters = Callable[[list[LogRecord]], int]


@dataclass(eq=False)  # each is itself: a key of a task's maps
class PartitionWork:
    """One partition log of a task, open and locked for the task's length."""

    log_dir: LogDir
    plog: PartitionLog
    plan: TopicPlan
    config: CompactionConfig  # the stage's (drained by --drain)
    report: StageReport
    noted: EmissionNote | None  # the log's own note of how far the sink committed (None: no note)
    # what this stage's passes did that a repeat of them after a crash would not do alike
    tombstones_superseded: int = 0
    dead_letters: int = 0  # sent, each in a transaction of its own
    failed: bool = False  # a pass failed, perhaps after rewriting part of the log

    @property
    def commits_before_emission(self) -> bool:
        """The passes are committed with the emission's notes after it, one manifest a log a stage: a crash in
        between repeats them, and emission resumes from what the sink holds. Not where a repeat would differ: a
        lost emission's erase-audit notes are made from the log's tombstones (erase_audit.recover_lost_notes), so
        a pass that dropped a tombstone for a later record of its key must leave the log read back the one
        emitted; dead letters a repeat would send again (committed before the emission, they are sent again only
        after a crash during the task's cleaning, as before); and a failed pass, which may have done either."""
        auditing = self.config.erase_audit_keys is not AuditKeys.OFF
        return self.failed or self.dead_letters > 0 or (auditing and self.tombstones_superseded > 0)

    @property
    def pid(self) -> PartitionId:
        return self.log_dir.pid

    @property
    def sink(self) -> PartitionId:
        return PartitionId(self.plan.sink, self.pid.partition)

    def clean(self, spec: JobSpec, now_ms: int, dead_letters: DeadLetters | None, emitted_up_to: int) -> None:
        """Every pass the partition is due: a record that a later pass of this stage removes (the dedupe buffer
        could not hold all keys at once) never reaches the sink. What the passes cleaned is held, its objects
        written, and committed with the stage's notes (commits_before_emission), and emission resumes from the
        sink's progress, so a crash anywhere in the stage loses nothing. A tombstone past ``emitted_up_to`` (the
        source offset through which the sink committed) stays in the log until the sink has it, however long
        emission fails."""
        manager = LogCleanerManager(self.config, _cleaner(self.config))
        report = self.report

        def sent(letters: list[LogRecord]) -> int:
            self.dead_letters += len(letters)
            return dead_letters(letters)

        for _ in range(spec.max_passes_per_trigger):
            log.debug("phase: clean %s", self.pid)
            outcome = manager.clean_partition(self.pid, self.plog, now_ms, None if dead_letters is None else sent,
                                              emitted_up_to)
            report.observe(self.plog, outcome.target, outcome.state, self.config)
            report.error = None if outcome.cause is None else TaskError.of(outcome.cause)
            self.failed |= outcome.cause is not None
            result = outcome.result
            if result is None:
                break
            report.figures = report.figures.with_pass(result)
            report.tombstones_removed += result.tombstones_removed
            self.tombstones_superseded += result.tombstones_superseded
            report.erase_log_ms.extend(e.at - e.timestamp for e in result.erased)
            if not result.map_full:
                break
        report.log_end_offset = self.plog.log_end_offset
        reached(Moment.CLEANED, str(self.pid))


def local_emitted(plog: PartitionLog) -> int | None:
    note = emission_note(plog)
    return None if note is None else note.emitted_up_to


def is_idle(plog: PartitionLog, emitted: int | None, config: CompactionConfig, now_ms: int,
          report: StageReport) -> bool:
    """True when this partition needs no pass and has nothing cleaned-but-unemitted, so the sink need not
    be touched. Emission progress is the sink's; the local note of it (``emitted``, written after each
    commit) only serves to skip: a stale note makes the stage look at the sink once too often, never skip a
    record."""
    if emitted is None:
        return False
    state = PartitionCleanerState.load(plog)
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


def quiet_until_of(plog: PartitionLog, report: StageReport, config: CompactionConfig, now_ms: int) -> int | None:
    """Until when the partition needs no task if no record arrives: never while it failed or owes the sink;
    a damaged log until its backoff ends; else the cleaner's quiet_until."""
    if report.error is not None or report.emitted_up_to < 0 or _owes_sink(plog, report.emitted_up_to):
        return None
    if plog.damaged:
        state = PartitionCleanerState.load(plog)
        return state.retry_at_ms if state.in_backoff(now_ms) else None
    target = log_to_clean(plog.segments, report.pid, plog.cleaner_checkpoint, config, now_ms)
    return quiet_until(plog.segments, target, config, now_ms)


def idle_report(state: StateDir, log_dir: LogDir, spec: JobSpec, now_ms: int, drain: bool, sink_unchanged: bool
                ) -> StageReport | None:
    """The report of a stage that would do nothing for this partition now: no forced roll due (``drain``:
    an empty active segment, since a drain rolls any other), nothing cleanable, and the sink holding
    everything cleaned (``sink_unchanged``: the sink is as the job's last stage left it (job.sink_watch), so
    the log's note of emission holds); None when the stage has work. It rolls, cleans and emits nothing
    (opening the log collects its garbage, as any opening does), so a --once run that finds every partition
    idle and nothing new to read can end without an engine."""
    if not sink_unchanged:
        return None
    plan = spec.topics[log_dir.pid.topic]
    with partition_lock(state, log_dir.directory):
        plog = open_partition_log(state, log_dir, plan.compaction.log_config)
        report = StageReport(log_dir.pid, log_end_offset=plog.log_end_offset)
        if (not plog.active.empty if drain else plog.forced_roll_due(now_ms)) or \
                not is_idle(plog, local_emitted(plog), stage_config(plan.compaction, drain), now_ms, report):
            return None
        count_erasures_overdue(plog, report, spec, now_ms)
        return report


def stage_config(config: CompactionConfig, drain: bool) -> CompactionConfig:
    return config.drained() if drain else config


def count_erasures_overdue(plog: PartitionLog, report: StageReport, spec: JobSpec, now_ms: int) -> None:
    config = spec.topics[report.pid.topic].compaction
    if config.erase_audit_keys is not AuditKeys.OFF:
        local = None if report.emitted_up_to >= 0 else local_emitted(plog)  # the sink's word first
        emitted = report.emitted_up_to if local is None else local
        report.erasures_overdue = count_overdue(
            plog, emitted, deadline_ms(config.max_compaction_lag_ms, spec.trigger_interval_ms), now_ms)


def note_emitted(work: PartitionWork, written_up_to: int, sink_cluster_id: str, now_ms: int,
                 sink_marks: tuple[int, int] | None) -> None:
    """The log's note of how far the sink committed its records (EmissionNote), made after the stage's
    emission; ``sink_marks``: its sink_floor and sink_reached, for the topic the stage's task read
    (report.sink_seen)."""
    seen = work.report.sink_seen
    floor, end = (None, None) if seen is None or sink_marks is None else sink_marks
    EmissionNote(work.report.emitted_up_to, written_up_to, sink_cluster_id, None if seen is None else seen[0], floor,
                 end).save(work.plog, now_ms)
