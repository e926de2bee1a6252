"""One compaction task: its partition logs opened and locked for the task's length, those that need nothing of
the sink left alone, and the others cleaned and emitted together through one producer (streaming.job.emission).
Spark calls compact_partitions, once per task of a stage."""

from __future__ import annotations

import contextlib

from streaming.job.compact import (PartitionWork, StageReport, StageTask, count_erasures_overdue, emission_note,
                                   is_idle, quiet_until_of, stage_config)
from streaming.job.emission import emit_task
from streaming.job.spec import JobSpec
from streaming.job.task import prepare_task
from streaming.state.layout import LogDir, open_partition_log
from streaming.state.locks import partition_lock
from streaming.state.stores import StateDir, task_state_dir


def _open(state: StateDir, log_dir: LogDir, spec: JobSpec, now_ms: int, attempt: int, drain: bool) -> PartitionWork:
    plan = spec.topics[log_dir.pid.topic]
    config = stage_config(plan.compaction, drain)
    plog = open_partition_log(state, log_dir, config.log_config)
    report = StageReport(log_dir.pid, attempt=attempt)
    report.rolled = plog.roll() if drain else plog.maybe_roll(now_ms)
    report.log_end_offset = plog.log_end_offset
    return PartitionWork(log_dir, plog, plan, config, report, emission_note(plog))


def compact_partitions(task: StageTask, attempt: int, spec: JobSpec, now_ms: int, drain: bool = False
                       ) -> list[StageReport]:
    """One Spark task's share of a stage: its logs rolled, cleaned and emitted, each one's report. ``attempt``:
    the task's attempt, in its reports (the driver fences the job's ids after a stage with a retried task)."""
    prepare_task([spec.source_kafka, spec.sink_kafka])
    state = task_state_dir(spec.state_dir)
    with contextlib.ExitStack() as locks:
        for log_dir in sorted(task.logs, key=lambda d: d.directory):  # one order: no two tasks wait on each other
            locks.enter_context(partition_lock(state, log_dir.directory))
        works = [_open(state, d, spec, now_ms, attempt, drain) for d in task.logs]
        busy = [w for w in works if not (w.pid in task.trusted and w.pid not in task.held and
                                          is_idle(w.plog, task.trusted[w.pid], w.config, now_ms, w.report))]
        if busy:
            emit_task(busy, task, attempt, spec, now_ms)
        for w in works:
            count_erasures_overdue(w.plog, w.report, spec, now_ms)
            w.report.quiet_until_ms = quiet_until_of(w.plog, w.report, w.config, now_ms)
        return [w.report for w in works]


