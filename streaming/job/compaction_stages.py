"""The job's compaction stages, as the driver runs them: which logs get a task (stage_plan), the ids fenced where
a writer of an earlier stage may be alive (transaction_slots), the sinks read before and recorded after
(sink_watch), and the stage's tasks, task i writing with slot i's transactional id (stage_task)."""

from __future__ import annotations

import functools
import logging
import re
from dataclasses import dataclass
from typing import Callable, Iterable, Mapping

from streaming.job.compact import StageReport, StageTask
from streaming.job.engine import Engine
from streaming.job.failures import telling_line
from streaming.job.sink_watch import SinkView, SinkWatch
from streaming.job.spec import JobSpec
from streaming.job.stage_plan import QuietLogs
from streaming.job.stage_task import compact_partitions
from streaming.job.task_error import ErrorKind, TaskError
from streaming.job.transaction_slots import TransactionSlots
from streaming.kafka.admin import Cluster
from streaming.kafka.sink.sink_state import SinkPartitionState
from streaming.partition_id import PartitionId
from streaming.state.layout import LogDir
from streaming.state.stores import StateDir

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class StageOutcome:
    ran: list[StageReport]  # the reports of the logs that had a task
    quiet: list[StageReport]  # the last reports of those left alone
    tasks: int


class CompactionStages:
    def __init__(self, engine: Engine, state: StateDir, spec: JobSpec) -> None:
        self.engine = engine
        self.quiet = QuietLogs()
        sink = Cluster("sink", spec.sink_bootstrap, spec.sink_kafka)
        self.slots = TransactionSlots(state, spec.job_id, sink.settings_with_bootstrap)
        self.watch = SinkWatch(state, sink, {t: p.sink for t, p in spec.topics.items()})

    def topics_changed(self, spec: JobSpec, changed: Iterable[str]) -> None:
        """The topics' plans changed (a topic re-planned, partitions added): their next stage runs them all."""
        self.quiet.forget(changed)
        self.watch.sinks = {t: p.sink for t, p in spec.topics.items()}

    def run(self, spec: JobSpec, logs: list[LogDir], now_ms: int, drain: bool,
            stopping: Callable[[], bool] = lambda: False) -> StageOutcome:
        """One stage: ``drain`` rolls every active segment first (--drain) and leaves no log alone; a stage cut
        short because the job stops (``stopping``) is the stop's, not a failure."""
        self.slots.fence_if_needed()
        view = self.watch.before_stage(d.pid for d in logs)
        plan = self.quiet.plan(logs, now_ms, self.engine.slots(), every=drain, woken=view.changed | set(view.held))
        self.slots.note_slots(len(plan.tasks))
        tasks = [_task(i, task_logs, view, self.watch, self.slots.fences) for i, task_logs in enumerate(plan.tasks)]
        log.debug("phase: compaction stage of %d of %d partitions in %d tasks", plan.logs, len(logs), len(tasks))
        run = functools.partial(compact_partitions, spec=spec, now_ms=now_ms, drain=drain)
        try:
            reports = [r for chunk in self.engine.run_tasks(run, tasks) for r in chunk] if tasks else []
        except Exception as exc:  # a task's process died, an executor lost for good: the next stage runs them again
            self.slots.after_stage([], raised=True)
            if stopping():
                raise
            reports = _failed(tasks, exc)
        except BaseException:
            self.slots.after_stage([], raised=True)
            raise
        else:
            self.slots.after_stage(reports)
        self.watch.after_stage(reports, self.slots.ids)
        self.quiet.note_stage(reports)
        return StageOutcome(reports, plan.quiet, len(tasks))

    def trusted(self, pids: Iterable[PartitionId]) -> frozenset[PartitionId]:
        """The partitions whose sinks are as the job's last stage left them (a --once run's check for work)."""
        return frozenset(self.watch.before_stage(pids).trusted)


def _failed(tasks: list[StageTask], exc: Exception) -> list[StageReport]:
    """The stage's partitions when its tasks failed as Spark tasks (their own failures are in their reports):
    each is failed, passing, and runs again at the next stage, from what its sink committed."""
    lost = re.search(r"most recent failure: ([^\n]*)", str(exc))  # Spark's line naming the task and its cause
    why = lost[1][:300] if lost else telling_line(exc)
    log.warning("the compaction stage's tasks failed (%s): their partitions run again at the next stage", why)
    error = TaskError(ErrorKind.TASK_LOST, f"the stage's tasks failed: {why}", True)
    return [StageReport(d.pid, error=error) for task in tasks for d in task.logs]


def _task(slot: int, logs: list[LogDir], view: SinkView, watch: SinkWatch, fences: int) -> StageTask:
    pids = {d.pid for d in logs}
    sinks: Mapping[PartitionId, SinkPartitionState] | None = None
    if view.states is not None:
        sinks = {s: view.states[s] for p in pids if (s := watch.sink_of(p)) in view.states}
    return StageTask(tuple(logs), slot, sinks, {p: e for p, e in view.trusted.items() if p in pids},
                     {p: t for p, t in view.held.items() if p in pids}, fences)
