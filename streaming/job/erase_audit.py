"""The compaction stage's part of the erase audit: journal the tombstones the sink committed, make good the
notes a crash lost, and count the erasures that are overdue (for Prometheus).

The sink is committed before the journal can say so: a crash in between leaves tombstones in the sink
without their event. The log's journal marks how far emission was noted (``emitted_through``), so the
next stage finds such a range, looks its tombstones up in the sink (the translate search) and notes them
as recovered, timed when they were found.
"""

from __future__ import annotations

import logging
import time
from typing import Mapping, TypeVar

from streaming.erasure.events import Emitted, tombstone_mask
from streaming.job.spec import JobSpec
from streaming.kafka.admin import Cluster
from streaming.kafka.source.first_records import sink_offsets_of
from streaming.kafka.sink.task_emitter import SinkPartition
from streaming.log import PartitionLog
from streaming.log.columns import offsets_of
from streaming.configuration.settings import LONG_MAX

log = logging.getLogger(__name__)

K = TypeVar("K")

EMITTED_THROUGH = "emitted_through"  # the journal mark: source offsets up to here are noted if emitted


def note_emission(plog: PartitionLog, part: SinkPartition) -> None:
    """Journal what the sink partition committed, and how far that goes."""
    events = [Emitted(d.source_offset, d.at_ms, d.sink_offset) for d in part.tombstones]
    plog.note(events, {EMITTED_THROUGH: part.emitted_up_to})
    part.tombstones.clear()


def recover_lost_notes(parts: Mapping[K, tuple[PartitionLog, SinkPartition]], spec: JobSpec) -> dict[K, Exception]:
    """Before emitting: tombstones the sink holds beyond each log's noted range are noted now, every
    partition's looked up in the sink together (a crash between a task's commit and its notes leaves all of
    the task's partitions behind at once). What could not be noted, by key: that partition must not emit, as
    its next note would mark the range noted without the events."""
    failed: dict[K, Exception] = {}
    behind: list[tuple[K, PartitionLog, SinkPartition, list[int]]] = []
    for key, (plog, part) in parts.items():
        try:
            if (lost := _lost(plog, part)) is not None:
                behind.append((key, plog, part, lost))
        except Exception as exc:  # noqa: BLE001 (this log's failure is this partition's)
            failed[key] = exc
    wanted = {part.sink: lost for _, _, part, lost in behind if lost}
    try:
        found = sink_offsets_of(Cluster("sink", spec.sink_bootstrap, spec.sink_kafka), wanted,
                                "the tombstones past the erase audit's notes") if wanted else {}
    except Exception as exc:  # noqa: BLE001 (the sink away: the partitions with tombstones to look up wait)
        failed |= {key: exc for key, _, _, lost in behind if lost}
        behind = [b for b in behind if not b[3]]
        found = {}
    now_ms = int(time.time() * 1000)
    for key, plog, part, lost in behind:
        events = [Emitted(offset, now_ms, found[part.sink].get(offset), recovered=True) for offset in lost]
        try:
            plog.note(events, {EMITTED_THROUGH: part.emitted_up_to})
        except Exception as exc:  # noqa: BLE001
            failed[key] = exc
            continue
        if lost:
            log.warning("%s: %d tombstones reached the sink without their erase-audit event (the job stopped in "
                        "between); noted now", plog.dir, len(lost))
    return failed


def _lost(plog: PartitionLog, part: SinkPartition) -> list[int] | None:
    """The source offsets of the tombstones past the log's noted range, in order (None: nothing to note)."""
    marks = plog.journal_marks
    if part.emitted_up_to <= marks.get(EMITTED_THROUGH, -1):
        return None
    if EMITTED_THROUGH not in marks and plog.journal_head is None:  # a log older than the audit: start here
        plog.note([], {EMITTED_THROUGH: part.emitted_up_to})
        return None
    return [int(o) for b in plog.read_batches(marks.get(EMITTED_THROUGH, -1) + 1, part.emitted_up_to + 1)
            for o in offsets_of(b)[tombstone_mask(b)]]


def count_overdue(plog: PartitionLog, emitted_up_to: int, bound_ms: int, now_ms: int) -> int:
    """Tombstones still in the log whose erasure is past due: not yet cleaned (earlier records of their key
    may remain) or not yet in the sink, ``bound_ms`` after their timestamp. Only segments that began before
    the deadline are read, so a partition that keeps up reads nothing."""
    if bound_ms >= LONG_MAX:
        return 0
    checkpoint = plog.cleaner_checkpoint if plog.cleaner_checkpoint is not None else plog.log_start_offset
    start = min(checkpoint, emitted_up_to + 1)
    deadline = now_ms - bound_ms
    overdue = 0
    for seg in plog.segments:
        if seg.last_offset is None or seg.last_offset < start or seg.first_timestamp is None \
                or seg.first_timestamp >= deadline:
            continue
        for batch in plog.segment_batches(seg):
            mask = tombstone_mask(batch) & (offsets_of(batch) >= start) & (batch.column("timestamp").to_numpy() < deadline)
            overdue += int(mask.sum())
    return overdue
