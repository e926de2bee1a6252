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

from streaming.erasure.events import Emitted, tombstone_mask
from streaming.job.spec import JobSpec
from streaming.kafka.task_emitter import SinkPartition
from streaming.kafka.translate import SinkReader, translate
from streaming.log import PartitionLog
from streaming.log.columns import offsets_of
from streaming.configuration.settings import LONG_MAX

log = logging.getLogger(__name__)

EMITTED_THROUGH = "emitted_through"  # the journal mark: source offsets up to here are noted if emitted


def note_emission(plog: PartitionLog, part: SinkPartition) -> None:
    """Journal what the sink partition committed, and how far that goes."""
    events = [Emitted(d.source_offset, d.at_ms, d.sink_offset) for d in part.tombstones]
    plog.note(events, {EMITTED_THROUGH: part.emitted_up_to})
    part.tombstones.clear()


def recover_lost_notes(plog: PartitionLog, part: SinkPartition, spec: JobSpec) -> None:
    """Before emitting: tombstones the sink holds beyond the noted range are noted now."""
    marks = plog.journal_marks
    noted = marks.get(EMITTED_THROUGH, -1)
    if part.emitted_up_to <= noted:
        return
    if EMITTED_THROUGH not in marks and plog.journal_head is None:  # a log older than the audit: start here
        plog.note([], {EMITTED_THROUGH: part.emitted_up_to})
        return
    lost = [int(o) for b in plog.read_batches(noted + 1, part.emitted_up_to + 1)
            for o in offsets_of(b)[tombstone_mask(b)]]
    now_ms = int(time.time() * 1000)
    events = []
    if lost:
        with SinkReader(spec.sink_bootstrap, part.sink.topic, part.sink.partition, spec.sink_kafka) as reader:
            for offset in lost:
                found = translate(reader, offset)
                sink_offset = found.sink_offset if found.source_offset == offset else None
                events.append(Emitted(offset, now_ms, sink_offset, recovered=True))
        log.warning("%s: %d tombstones reached the sink without their erase-audit event (the job stopped in "
                    "between); noted now", plog.dir, len(lost))
    plog.note(events, {EMITTED_THROUGH: part.emitted_up_to})


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
