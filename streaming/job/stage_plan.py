"""Which partition logs a compaction stage gives a task, and how many logs share one.

A mirror of a whole cluster holds thousands of partitions, most of them idle. A log that owes the sink
nothing, received no record since its last stage and has no pass or forced roll due (its report's
quiet_until_ms) gets no task and no request: the stage hands back its last report. The logs that do get one
share the stage's tasks, sized by the records each received, so a stage costs what its work costs and not
one Spark task per partition the job knows.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from collections.abc import Set
from typing import Iterable, Mapping, Sequence

from streaming.job.balance import spread
from streaming.job.compact import StageReport
from streaming.partition_id import PartitionId
from streaming.state.layout import LogDir

TASKS_PER_SLOT = 2  # tasks per core a stage's logs are spread over: a slow log does not hold a whole core's share


@dataclass(frozen=True)
class StagePlan:
    tasks: list[list[LogDir]]  # each task's logs
    quiet: list[StageReport]  # the last report of each log left alone

    @property
    def logs(self) -> int:
        return sum(map(len, self.tasks))


@dataclass
class QuietLogs:
    """The driver's memory of the last report of every log, and of the records appended since."""

    reports: dict[PartitionId, StageReport] = field(default_factory=dict)
    appended: dict[PartitionId, int] = field(default_factory=dict)  # records appended since each log's last stage

    def note_appended(self, counts: Mapping[PartitionId, int], ends: Mapping[PartitionId, int]) -> None:
        """A batch's appends: ``counts`` of records appended (a roll: 1), and where each log it read ends. A log
        whose end moved since its last stage is woken even when this batch appended nothing to it: records an
        attempt that failed appended, replayed now, still have to be cleaned and may be due a forced roll."""
        for pid, n in counts.items():
            self.appended[pid] = self.appended.get(pid, 0) + n
        for pid, end in ends.items():
            report = self.reports.get(pid)
            if report is not None and end != report.log_end_offset and pid not in self.appended:
                self.appended[pid] = abs(end - report.log_end_offset)

    def note_stage(self, reports: Iterable[StageReport]) -> None:
        for r in reports:
            self.reports[r.pid] = r.carried()
            self.appended.pop(r.pid, None)

    def forget(self, topics: Iterable[str]) -> None:
        """The topics' plans changed (a topic re-planned, partitions added): their next stage runs them all."""
        gone = set(topics)
        self.reports = {p: r for p, r in self.reports.items() if p.topic not in gone}

    def is_quiet(self, pid: PartitionId, now_ms: int) -> bool:
        report = self.reports.get(pid)
        return (report is not None and pid not in self.appended and report.quiet_until_ms is not None
                and now_ms < report.quiet_until_ms)

    def plan(self, logs: Sequence[LogDir], now_ms: int, slots: int, every: bool = False,
             woken: Set[PartitionId] = frozenset()) -> StagePlan:
        """``every``: no log is left alone (--drain rolls every active segment); ``woken``: these are not (their
        sinks changed)."""
        busy, quiet = [], []
        for d in logs:
            if not every and d.pid not in woken and self.is_quiet(d.pid, now_ms):
                quiet.append(self.reports[d.pid])
            else:
                busy.append(d)
        return StagePlan(spread(busy, [self.appended.get(d.pid, 0) for d in busy], slots * TASKS_PER_SLOT),
                         quiet)

