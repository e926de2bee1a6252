"""QuietLogs: a stage gives no task to a log that owes the sink nothing, received nothing since its last stage
and has no pass or roll due, and whose sink did not change; it hands back that log's last report, without the
work it counted then."""

from __future__ import annotations

from streaming.cleaner import PartitionFigures
from streaming.job.compact import StageReport
from streaming.job.stage_plan import QuietLogs
from streaming.partition_id import PartitionId
from streaming.state.layout import LogDir

A, B, C = PartitionId("a", 0), PartitionId("a", 1), PartitionId("b", 0)
LOGS = [LogDir(p, f"/state/logs/{p}") for p in (A, B, C)]


def report(pid: PartitionId, quiet_until_ms: int | None, log_end_offset: int = 0) -> StageReport:
    return StageReport(pid, emitted=5, quiet_until_ms=quiet_until_ms, figures=PartitionFigures(passes=2),
                       log_end_offset=log_end_offset)


def ran(plan) -> list[PartitionId]:
    return sorted(d.pid for task in plan.tasks for d in task)


def test_the_first_stage_runs_every_log_and_the_next_only_those_with_work() -> None:
    quiet = QuietLogs()
    assert ran(quiet.plan(LOGS, now_ms=0, slots=2)) == [A, B, C]
    quiet.note_stage([report(A, None), report(B, 1_000), report(C, 1_000)])
    plan = quiet.plan(LOGS, now_ms=10, slots=2)
    assert ran(plan) == [A], "A's last stage left it due"
    assert [r.pid for r in plan.quiet] == [B, C]
    assert all(r.emitted == 0 and r.figures.passes == 0 for r in plan.quiet), "a carried report counts no work twice"


def test_a_record_appended_or_the_time_reached_wakes_a_log() -> None:
    quiet = QuietLogs()
    quiet.note_stage([report(A, 1_000), report(B, 1_000), report(C, 1_000)])
    quiet.note_appended({B: 7}, {B: 7})
    assert ran(quiet.plan(LOGS, now_ms=10, slots=2)) == [B]
    assert ran(quiet.plan(LOGS, now_ms=1_000, slots=2)) == [A, B, C]


def test_a_log_whose_end_moved_is_woken_though_its_batch_appended_nothing() -> None:
    """An ingest attempt appended records and failed; its retry found them in the log and appended none (they
    are replayed, not appended): the log's end moved since its last stage all the same, and its records may
    be due a forced roll."""
    quiet = QuietLogs()
    quiet.note_stage([report(A, 1_000, log_end_offset=40), report(B, 1_000, log_end_offset=40),
                      report(C, 1_000, log_end_offset=10)])
    quiet.note_appended({}, {A: 40, B: 52})
    assert ran(quiet.plan(LOGS, now_ms=10, slots=2)) == [B]


def test_a_log_whose_sink_changed_is_woken() -> None:
    quiet = QuietLogs()
    quiet.note_stage([report(A, 1_000), report(B, 1_000), report(C, 1_000)])
    assert ran(quiet.plan(LOGS, now_ms=10, slots=2, woken=frozenset({C}))) == [C]


def test_a_drain_and_a_changed_plan_run_every_log() -> None:
    quiet = QuietLogs()
    quiet.note_stage([report(A, 1_000), report(B, 1_000), report(C, 1_000)])
    assert ran(quiet.plan(LOGS, now_ms=10, slots=2, every=True)) == [A, B, C]
    quiet.forget(["b"])
    assert ran(quiet.plan(LOGS, now_ms=10, slots=2)) == [C]


def test_logs_share_tasks_two_per_slot() -> None:
    many = [LogDir(PartitionId("t", p), f"/state/logs/t-{p}") for p in range(100)]
    assert len(QuietLogs().plan(many, now_ms=0, slots=2).tasks) == 4
