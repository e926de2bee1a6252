"""A compaction task's emission: all its partitions through one transactional producer
(streaming.kafka.sink.task_emitter), in the order exactly-once needs:
1. fence: the producer's init_transactions with its task's slot's id, which ends an earlier attempt of the
   task (the driver has fenced every other id that may still write, streaming.job.transaction_slots); then a
   task the driver has fenced since it was made (a lost executor's, thawed) ends without writing;
2. where each partition resumes, from the sinks' states read again in bulk after the fence (an earlier
   attempt, or a stale task, may have written since the driver read them): where a sink is still as the job's
   last stage left it (its topic's id and its end, StageTask.trusted) what that stage committed, nothing read
   where the sink partition is empty, else its last committed record of the job's, read back for every
   partition with one read_committed consumer (streaming.kafka.sink.sink_progress), and past the records the log's
   note says were left out after it (EmissionNote: they came from the sink's cluster). A partition whose last
   stable offset stays below its high watermark for SETTLE_S has a transaction open: it is reported (the
   driver resolves it between stages), and nothing is emitted to it;
3. write: the erase audit's lost notes made good, the passes (dead letters in transactions of their own),
   then one emission in transactions spanning the partitions.
"""

from __future__ import annotations

import functools
import logging
import time
from typing import Mapping

from streaming.cleaner import KeylessPolicy
from streaming.erasure.events import AuditKeys
from streaming.job.compact import DeadLetters, PartitionWork, StageTask, note_emitted
from streaming.job.erase_audit import note_emission, recover_lost_notes
from streaming.job.spec import JobSpec
from streaming.job.task_commit import TaskCommit
from streaming.job.transaction_slots import is_stale
from streaming.job.task_error import ErrorKind, TaskError
from streaming.kafka.sink.dead_letters import dead_letter
from streaming.kafka.native.gate import NativePathError
from streaming.kafka.sink.record_size import RecordLimits
from streaming.job.held_sinks import OpenTransaction
from streaming.kafka.sink.sink_progress import read_last_mirrored
from streaming.kafka.sink.sink_state import SinkPartitionState, SinkStateReader, settled
from streaming.kafka.sink.task_emitter import EmitterFenced, SinkPartition, TaskEmitter
from streaming.kafka.sink.transactional_ids import transactional_id
from streaming.partition_id import PartitionId
from streaming.state.stores import task_state_dir

log = logging.getLogger(__name__)

SETTLE_S = 10.0  # how long a last stable offset below the high watermark is read again (markers on their way)
STATE_TIMEOUT_S = 30.0


def _fail(works: list[PartitionWork], exc: BaseException, kind: ErrorKind = ErrorKind.FAILED) -> None:
    for w in works:
        w.report.error = w.report.error or TaskError.of(exc, kind)


def emit_task(works: list[PartitionWork], task: StageTask, attempt: int, spec: JobSpec, now_ms: int,
              commit: TaskCommit) -> None:
    """Fills each work's report: what its sink committed, or why it could not emit. Each log's roll, passes and
    notes of the emission are held for the task's commit after it (every log's by one ``commit``), but for a log
    whose passes a repeat would not do alike (PartitionWork.commits_before_emission)."""
    tid = transactional_id(spec.job_id, task.slot)
    if (stale := _stale(tid, task, spec)) is not None:  # before init_transactions: it would abort a successor's
        _fail(works, stale, ErrorKind.FENCED)
        return
    try:
        config = works[0].config
        emitter = TaskEmitter(spec.sink_bootstrap, tid, spec.sink_kafka, config.emit_transaction_records,
                              spec.kafka_native, config.emit_transaction_ms, origins=spec.origins,
                              limits=_limits(works, spec))
    except (EmitterFenced, NativePathError) as exc:  # init_transactions failed for good (not allowed); a defect
        _fail(works, exc)
        return
    except Exception as exc:  # noqa: BLE001 (sink unreachable: nothing is cleaned unseen; the next trigger tries again)
        _fail(works, exc, ErrorKind.SINK_UNREACHABLE)
        return
    ready: dict[PartitionWork, SinkPartition] = {}
    try:
        if (stale := _stale(tid, task, spec)) is not None:  # and after it: the driver may have fenced meanwhile
            raise stale
        ready = _resume(works, task, spec, emitter)
        log.debug("%s (attempt %d): emitting to %s", tid, attempt, ", ".join(str(w.sink) for w in ready))
        unnoted = recover_lost_notes({w: (w.plog, part) for w, part in ready.items()
                                      if w.config.erase_audit_keys is not AuditKeys.OFF}, spec)
        for w, exc in unnoted.items():
            w.report.error = TaskError.of(exc)
            del ready[w]
        for w in list(ready):
            try:
                w.clean(spec, now_ms, _dead_letters(w, spec, emitter), ready[w].emitted_up_to)
            except EmitterFenced:  # a dead letter's transaction: the task's producer is done
                raise
            except Exception as exc:  # noqa: BLE001 (a pass failed mid-way: its partition emits next stage)
                w.report.error = TaskError.of(exc)
                del ready[w]
        if first := [w for w in ready if w.commits_before_emission]:
            failed = commit([w.plog for w in first], hold_on=True)
            for w in [w for w in first if w.plog in failed]:
                w.report.error = TaskError.of(failed[w.plog])
                del ready[w]
            commit.barrier.cross()  # durable before the sink has any of it: a power cut cannot take the log back
        owed = [(part, w.plog.read_batches(part.emitted_up_to + 1, w.plog.cleaner_checkpoint))
                for w, part in ready.items() if _owes(w, part)]
        if owed:
            log.debug("phase: emit %d partitions through %s: %s", len(owed), tid, ", ".join(str(p) for p, _ in owed))
            emitter.emit(owed)
            for w, part in ready.items():
                if part.refused is not None:  # the task's other partitions committed theirs
                    w.report.error = TaskError(ErrorKind.RECORD_TOO_LARGE, part.refused, False)
    except EmitterFenced as exc:
        log.warning("%s; the next stage emits from what the sink committed", exc)
        _fail([w for w in works if w not in ready or _owes(w, ready[w])], exc, ErrorKind.FENCED)
    except Exception as exc:  # noqa: BLE001 (an emission failed mid-way: the sink's own progress says where to resume)
        _fail([w for w in works if w not in ready or _owes(w, ready[w])], exc)
    finally:
        emitter.close()
        for w, part in ready.items():
            w.report.emitted_up_to, w.report.emitted = part.emitted_up_to, part.committed_records
            w.report.erase_sink_ms.extend(d.at_ms - d.timestamp_ms for d in part.tombstones)
            if part.looped_records:
                log.debug("%s: %d records left out: they came from the sink's cluster", part, part.looped_records)
    for w, part in ready.items():
        _note(w, part, spec, now_ms)


def _note(work: PartitionWork, part: SinkPartition, spec: JobSpec, now_ms: int) -> None:
    """What the stage committed of the partition, in its log's notes."""
    if work.config.erase_audit_keys is not AuditKeys.OFF:
        try:
            note_emission(work.plog, part)
        except Exception as exc:  # noqa: BLE001 (the next stage finds the range unnoted and makes it good)
            work.report.error = work.report.error or TaskError.of(exc)
    # records committed this stage lie at or past the sink's end as the task read it, and move it on
    seen = work.report.sink_seen
    marks = (seen[1], seen[1] + part.committed_records) if part.committed_records and seen else part.sink_marks
    note_emitted(work, part.written_up_to, spec.sink_cluster_id, now_ms, marks)


def _stale(tid: str, task: StageTask, spec: JobSpec) -> EmitterFenced | None:
    """Why the task must write nothing, where the driver fenced the job's ids after it made the task (a later
    stage may be writing its partitions, in a transaction the task's own init_transactions would abort)."""
    if not is_stale(task_state_dir(spec.state_dir), spec.job_id, task.fences):
        return None
    return EmitterFenced(f"{tid}: the job's transactional ids were fenced after this task was made (a later stage "
                         f"may write its partitions): it writes nothing")


def _owes(work: PartitionWork, part: SinkPartition) -> bool:
    """The passes kept records past what the sink holds."""
    checkpoint = work.plog.cleaner_checkpoint
    return checkpoint is not None and checkpoint > part.emitted_up_to + 1


def _limits(works: list[PartitionWork], spec: JobSpec) -> RecordLimits:
    """How big a record the task's sinks and the dead-letter topic take, as the job read them when it planned them."""
    return RecordLimits({w.plan.sink: w.plan.sink_max_message_bytes for w in works
                         if w.plan.sink_max_message_bytes is not None},
                        spec.dead_letter_topic, spec.dead_letter_max_message_bytes,
                        {w.plan.sink: w.plan.source for w in works})


def _dead_letters(work: PartitionWork, spec: JobSpec, emitter: TaskEmitter) -> DeadLetters | None:
    if work.config.keyless_policy is not KeylessPolicy.DEAD_LETTER or not spec.dead_letter_topic:
        return None
    return functools.partial(dead_letter, emitter, spec.dead_letter_topic, work.pid)


def _resume(works: list[PartitionWork], task: StageTask, spec: JobSpec,
            emitter: TaskEmitter) -> dict[PartitionWork, SinkPartition]:
    """Step 2: each work's place in its sink, or (in its report) why it emits nothing this stage."""
    client = emitter.client_config
    reader = SinkStateReader(client, STATE_TIMEOUT_S)
    states = reader.read(w.sink for w in works)
    ready: dict[PartitionWork, SinkPartition] = {}
    unread: dict[PartitionWork, SinkPartitionState] = {}
    for w in works:
        w.report.emitted_up_to = -1 if w.noted is None else w.noted.emitted_up_to  # until the sink says otherwise
        held = task.held.get(w.pid)
        state = states.get(w.sink)
        if held is not None:
            w.report.open_transaction = held
            w.report.error = TaskError(ErrorKind.OPEN_TRANSACTION, held.describe(spec.sink_bootstrap), False)
        elif state is None:
            w.report.error = TaskError(ErrorKind.SINK_UNREACHABLE, f"sink topic {w.plan.sink!r} does not exist "
                                       f"(deleted?); the job's topic sync makes it again", True)
        elif w.pid in task.trusted and _unchanged(w.sink, state, task.sinks):
            trusted = task.trusted[w.pid]
            ready[w] = SinkPartition(w.sink, trusted, None if w.noted is None else
                                     w.noted.written_for(trusted, spec.sink_cluster_id), sink_marks=_marks(w, state))
        elif state.empty:
            ready[w] = SinkPartition(w.sink, -1)
        else:
            unread[w] = state
        if w in ready:
            w.report.sink_seen = (state.topic_id, state.high)
    unread = _settled(reader, unread)
    for w, state in list(unread.items()):
        if state.open:
            w.report.open_transaction = OpenTransaction(w.sink, state.stable, int(time.time() * 1000))
            w.report.error = TaskError(ErrorKind.OPEN_TRANSACTION, f"a transaction is open on {w.sink} at sink "
                                       f"offset {state.stable}: the job looks into whose it is", True)
            del unread[w]
    progress = read_last_mirrored(client, {w.sink: s for w, s in unread.items()}) if unread else {}
    for w, state in unread.items():
        last = progress[w.sink]
        found = -1 if last is None else last.source_offset
        kept = w.noted is not None and w.noted.kept_by(state.topic_id, state.low, state.high)
        marks = _marks(w, state) if kept else None
        if last is not None:  # the job's record found is at or below its last: a floor, and the sink passed it
            marks = (last.sink_offset, last.sink_offset + 1) if marks is None else \
                (max(marks[0], last.sink_offset), max(marks[1], last.sink_offset + 1))
        if kept:
            resume = max(found, w.noted.emitted_up_to)  # the broker compacted the job's last records away
        else:
            if w.noted is not None and found < w.noted.written_up_to:
                log.warning("%s: the sink holds less than this job committed to it (source offsets through %d, the "
                            "sink through %d): it was emptied, re-created or truncated; emission resumes after %d",
                            w.sink, w.noted.written_up_to, found, found)
            resume = found if w.noted is None else w.noted.resumes_after(found, spec.sink_cluster_id)
        ready[w] = SinkPartition(w.sink, resume, found, sink_marks=marks)
        w.report.sink_seen = (state.topic_id, state.high)
    return ready


def _marks(work: PartitionWork, state: SinkPartitionState) -> tuple[int, int] | None:
    """The note's sink_floor and sink_reached where it is of this sink topic and knows them."""
    noted = work.noted
    return None if noted is None or noted.sink_topic_id != state.topic_id else noted.sink_marks


def _unchanged(sink: PartitionId, state: SinkPartitionState,
               before: Mapping[PartitionId, SinkPartitionState] | None) -> bool:
    """The sink partition as the driver read it before the stage: nobody has written it or deleted its records
    since."""
    seen = None if before is None else before.get(sink)
    return seen is not None and not state.open and (seen.topic_id, seen.low, seen.high) == \
        (state.topic_id, state.low, state.high)


def _settled(reader: SinkStateReader, unread: dict[PartitionWork, SinkPartitionState]
             ) -> dict[PartitionWork, SinkPartitionState]:
    """The states again while some show a transaction open, for up to SETTLE_S."""
    states = settled(reader.read, {w.sink: s for w, s in unread.items()}, SETTLE_S, 0.2)
    return {w: states[w.sink] for w in unread}
