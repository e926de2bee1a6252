"""One compaction task: its partition logs opened and locked for the task's length, those that need nothing of
the sink left alone, and the others cleaned and emitted together through one producer (streaming.job.emission).
Each log's changes are held, not committed a step at a time: its roll, its passes and its notes of the emission
in one manifest after the emission (a second before it only where a repeat of the passes would not do alike:
PartitionWork.commits_before_emission), made for all the task's logs behind one barrier
(streaming.job.task_commit). Spark calls compact_partitions, once per task of a stage."""

from __future__ import annotations

import contextlib

from streaming.job.compact import (PartitionWork, StageReport, StageTask, count_erasures_overdue, is_idle,
                                   quiet_until_of, stage_config)
from streaming.job.emission_note import emission_note
from streaming.job import task_io
from streaming.job.emission import emit_task
from streaming.job.spec import JobSpec
from streaming.job.task import prepare_task
from streaming.job.task_commit import TaskCommit
from streaming.job.task_error import TaskError
from streaming.log.read_keep import ReadKeep
from streaming.log.storage import Barrier
from streaming.runtime.moments import Moment, reached
from streaming.state.layout import LogDir, open_partition_log
from streaming.state.locks import partition_lock
from streaming.state.stores import StateDir, task_state_dir


def _open(state: StateDir, log_dir: LogDir, spec: JobSpec, now_ms: int, attempt: int, drain: bool,
          barrier: Barrier, keep: ReadKeep) -> PartitionWork:
    plan = spec.topics[log_dir.pid.topic]
    config = stage_config(plan.compaction, drain)
    plog = open_partition_log(state, log_dir, config.log_config, barrier, keep)
    plog.hold_commits()  # the roll, the passes and the notes: one manifest, after the emission
    report = StageReport(log_dir.pid, attempt=attempt)
    report.rolled = plog.roll() if drain else plog.maybe_roll(now_ms)
    report.log_end_offset = plog.log_end_offset
    return PartitionWork(log_dir, plog, plan, config, report, emission_note(plog))


def compact_partitions(task: StageTask, attempt: int, spec: JobSpec, now_ms: int, drain: bool = False,
                       io_threads: int | None = None) -> list[StageReport]:
    """One Spark task's share of a stage: its logs rolled, cleaned and emitted, each one's report. ``attempt``:
    the task's attempt, in its reports (the driver fences the job's ids after a stage with a retried task);
    ``io_threads``: how many logs' storage work runs at once (None: as streaming.job.task_io chooses for the state
    dir's storage)."""
    prepare_task([spec.source_kafka, spec.sink_kafka])
    state = task_state_dir(spec.state_dir)
    io_threads = task_io.threads_for(state.local) if io_threads is None else io_threads
    with contextlib.ExitStack() as locks:
        commit = TaskCommit(locks.enter_context(Barrier()), io_threads)
        for log_dir in sorted(task.logs, key=lambda d: d.directory):  # one order: no two tasks wait on each other
            locks.enter_context(partition_lock(state, log_dir.directory))
        keep = ReadKeep()  # the small objects the passes map, read again by a rewrite or the emission
        works = task_io.each(lambda d: _open(state, d, spec, now_ms, attempt, drain, commit.barrier, keep), task.logs,
                             io_threads)
        busy = [w for w in works if not (w.pid in task.trusted and w.pid not in task.held and
                                          is_idle(w.plog, task.trusted[w.pid], w.config, now_ms, w.report))]
        try:
            if busy:
                emit_task(busy, task, attempt, spec, now_ms, commit)
                reached(Moment.LOG_COMMIT, f"{len(works)} logs")
        finally:
            # what the task holds (its passes and notes of the emission, or the roll of a log that needed no pass);
            # a log whose commit fails reports it, and the next stage repeats its passes and finds the notes it
            # lost (the sink is the record of the emission)
            failed = commit([w.plog for w in works])
            for w in works:
                if w.plog in failed:
                    w.report.error = w.report.error or TaskError.of(failed[w.plog])
        task_io.each(lambda w: _close_report(w, spec, now_ms), works, io_threads)
        return [w.report for w in works]


def _close_report(work: PartitionWork, spec: JobSpec, now_ms: int) -> None:
    count_erasures_overdue(work.plog, work.report, spec, now_ms)
    work.report.quiet_until_ms = quiet_until_of(work.plog, work.report, work.config, now_ms)
