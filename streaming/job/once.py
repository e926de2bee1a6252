"""--once with nothing to do: no source partition has records past the checkpoint's last committed batch,
and every partition log's stage would do nothing (compact.idle_report; with --drain, every active segment
is empty too). Then the run's one stage is those reports, and no engine starts: a compactor run from cron on
a quiet cluster costs seconds. Kafka is asked in bulk (one request per leader for the source's offsets and
one for the sink's ends), so the answer costs the same for four partitions and for thousands. And every
--once run's exit status, from its last stage (outcome)."""

from __future__ import annotations

import logging
import os
from collections.abc import Set

from streaming.job.compact import StageReport, idle_report
from streaming.job.engine import Engine
from streaming.job.failures import nothing_cleanable
from streaming.job.spec import JobSpec
from streaming.kafka.admin import Cluster
from streaming.log.storage import LocalStorage, Storage
from streaming.partition_id import PartitionId
from streaming.state.layout import LogDir, checkpoint_dir, spark_checkpoint
from streaming.state.stores import StateDir

log = logging.getLogger(__name__)


def checkpoint_files(state: StateDir, checkpoint_location: str) -> tuple[Storage, str] | None:
    """The checkpoint as files the driver reads itself: the state dir's own, or a local path given."""
    if checkpoint_location == spark_checkpoint(state):
        return state.storage, checkpoint_dir(state)
    if "://" not in checkpoint_location:
        return LocalStorage(), os.path.abspath(checkpoint_location)
    return None


def idle_reports(spec: JobSpec, state: StateDir, engine: Engine, checkpoint_location: str, source: Cluster,
                 logs: list[LogDir], sink_unchanged: Set[PartitionId], now_ms: int, drain: bool
                 ) -> list[StageReport] | None:
    """Each log's report when the run has nothing to do; None when it has."""
    where = checkpoint_files(state, checkpoint_location)
    committed = None if where is None else engine.committed_offsets(*where)
    if committed is None:
        return None
    partitions = [PartitionId(t, p) for t, plan in spec.topics.items() for p in range(plan.partitions)]
    try:
        ranges = source.offset_ranges(partitions)
    except Exception as exc:  # noqa: BLE001 (the query itself reports a source that is away)
        log.debug("offsets of the source topics unavailable: %s", exc)
        return None
    if any(committed.get(pid, low) != high for pid, (low, high) in ranges.items()):
        return None
    reports = []
    for log_dir in logs:
        report = idle_report(state, log_dir, spec, now_ms, drain, log_dir.pid in sink_unchanged)
        if report is None:
            return None
        reports.append(report)
    return reports


def failed_reports(reports: list[StageReport]) -> list[StageReport]:
    """The partitions a stage could not clean or emit."""
    return [r for r in reports if r.error or r.figures.uncleanable]


def outcome(reports: list[StageReport], emitted: int, now_ms: int, drain: bool) -> int:
    """--once's exit status from its last stage, with the reason when it emitted nothing."""
    failed = failed_reports(reports)
    for r in failed:
        log.error("partition %s is uncleanable or could not emit; see kcompact status", r.pid)
    if not emitted and not failed:
        waiting = nothing_cleanable(reports, now_ms, drain)
        if waiting:
            log.warning("%s", waiting)
    return 1 if failed else 0
