"""The driver's watch over the sink partitions: each one's identity and end as the job's last stage that touched
it left it, read anew before every stage, and the transactions left open on them.

Before a stage (before_stage), every sink partition of the job's logs is read in bulk (its topic's id, log
start, last stable offset and high watermark: one request per leader for each, streaming.kafka.sink.sink_state).
One whose topic id, log start and high watermark are what was recorded after the job's last stage that read or wrote it
is trusted: what that stage's task committed to it, recorded beside them, is where it resumes, and its task
reads none of its records. One that changed is not, and is woken if it was being left alone: a sink deleted
and made again while its source is idle is filled again. After a stage (after_stage), each partition its
task read is recorded anew (sink-ends.json, keyed by sink partition, so a changed mapping trusts nothing of
the old one), once its transaction's markers are down, and only if the sink is still the one the task read
(its topic id, and its end where the task committed nothing): a sink made again during the stage is read
at the next. The record is the driver's, taken from the reports Spark accepted, so a stale attempt of a
task that wakes later cannot change it.

A transaction a task found open is resolved here, between stages (streaming.kafka.sink.open_transactions): the
job's own is ended, another writer's is named, kept in open-transactions.json, and holds its partition's
emission until it ends, shown by status, the progress line, the metrics and verify.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass, field
from typing import Iterable, Mapping

from streaming.job.compact import StageReport
from streaming.kafka.admin import Cluster
from streaming.job.held_sinks import OpenTransaction, read_held, write_held
from streaming.kafka.sink.open_transactions import end_own
from streaming.kafka.sink.sink_state import SinkPartitionState, read_states, settled
from streaming.log.storage import read_json, write_json
from streaming.partition_id import PartitionId
from streaming.state.layout import sink_ends_file
from streaming.state.stores import StateDir
from streaming.utc import utc_text

log = logging.getLogger(__name__)

STATE_TIMEOUT_S = 10.0
MARKERS_S = 2.0  # how long a partition just written is read again for its transaction's markers


@dataclass(frozen=True)
class SinkEnd:
    """A sink partition as the job's last stage that read it left it."""

    topic_id: str
    end: int            # its high watermark
    emitted_up_to: int  # the source offset of the job's last record committed there
    low: int            # its log start: records deleted (DeleteRecords, retention) move it, and it is not trusted

    def matches(self, state: SinkPartitionState) -> bool:
        return (self.topic_id, self.end, self.low) == (state.topic_id, state.high, state.low)


@dataclass(frozen=True)
class SinkView:
    """What the driver read of the sinks before a stage, by source partition."""

    states: Mapping[PartitionId, SinkPartitionState] | None  # by sink partition; None: the sink did not answer
    trusted: Mapping[PartitionId, int] = field(default_factory=dict)  # by source partition: where it resumes
    changed: frozenset[PartitionId] = frozenset()  # recorded, and no longer as recorded: woken
    held: Mapping[PartitionId, OpenTransaction] = field(default_factory=dict)


class SinkWatch:
    def __init__(self, state: StateDir, sink: Cluster, sinks: Mapping[str, str]) -> None:
        """``sinks``: each source topic's sink topic."""
        self.state, self.sink, self.sinks = state, sink, dict(sinks)
        doc = read_json(state.storage, sink_ends_file(state)) or {}
        self.ends: dict[PartitionId, SinkEnd] = {
            pid: SinkEnd(v["topic_id"], v["end"], v["emitted_up_to"], v["low"]) for k, v in doc.get("ends", {}).items()
            if isinstance(v, dict) and "emitted_up_to" in v and "low" in v  # without low: read again, not trusted
            and (pid := PartitionId.from_name(k)) is not None}
        self.open = read_held(state)

    def sink_of(self, pid: PartitionId) -> PartitionId:
        return PartitionId(self.sinks[pid.topic], pid.partition)

    def _read(self, sinks: Iterable[PartitionId]) -> dict[PartitionId, SinkPartitionState] | None:
        wanted = list(sinks)
        try:
            return read_states(self.sink.admin, wanted, STATE_TIMEOUT_S) if wanted else {}
        except Exception as exc:  # noqa: BLE001 (the tasks read the sink themselves, and report it away)
            log.debug("the state of %d sink partitions unavailable: %s", len(wanted), exc)
            self.sink.renew_admin()
            return None

    def before_stage(self, pids: Iterable[PartitionId]) -> SinkView:
        pids = [p for p in pids if p.topic in self.sinks]
        states = self._read(self.sink_of(p) for p in pids)
        if states is None:
            return SinkView(None)
        trusted, changed = {}, set()
        for p in pids:
            sink, state = self.sink_of(p), states.get(self.sink_of(p))
            recorded = self.ends.get(sink)
            if state is not None and recorded is not None and recorded.matches(state):
                trusted[p] = recorded.emitted_up_to
            elif recorded is not None:
                changed.add(p)
        for sink, held in list(self.open.items()):
            state = states.get(sink)
            if state is None or state.stable > held.start or not state.open:
                log.info("%s: the other writer's transaction open at sink offset %d since %s UTC has ended; emission "
                         "resumes", sink, held.start, utc_text(held.since_ms))
                del self.open[sink]
                self._save_open()
        held = {p: self.open[self.sink_of(p)] for p in pids if self.sink_of(p) in self.open}
        return SinkView(states, trusted, frozenset(changed), held)

    def after_stage(self, reports: Iterable[StageReport], ids: list[str]) -> None:
        reports = [r for r in reports if r.pid.topic in self.sinks]
        found = [r for r in reports if r.open_transaction is not None and not r.open_transaction.another_writers]
        if found:
            self._resolve(found, ids)
        self._record({self.sink_of(r.pid): r for r in reports if r.sink_seen is not None})

    def _record(self, read: Mapping[PartitionId, StageReport]) -> None:
        """Each sink partition its task read: its identity, end and what the task left committed, once its
        markers are down and while it is the sink the task read; else (or failed) forgotten, so its next stage
        reads it."""
        if not read:
            return
        states = settled(lambda sinks: self._read(sinks) or {}, self._read(read) or {}, MARKERS_S, 0.05)
        for sink, report in read.items():
            state, (topic_id, high) = states.get(sink), report.sink_seen
            if state is None or state.open or report.error or state.topic_id != topic_id or \
                    (report.emitted == 0 and state.high != high):
                self.ends.pop(sink, None)
            else:
                self.ends[sink] = SinkEnd(state.topic_id, state.high, report.emitted_up_to, state.low)
        write_json(self.state.storage, sink_ends_file(self.state),
                   {"ends": {str(p): dataclasses.asdict(e) for p, e in self.ends.items()}})

    def _resolve(self, found: list[StageReport], ids: list[str]) -> None:
        """Each open transaction the stage found: ended if the job's, else kept as another writer's."""
        opened = {r.open_transaction.sink: r.open_transaction for r in found}
        try:
            end_own(self.sink.settings_with_bootstrap, ids, list(opened))
        except Exception as exc:  # noqa: BLE001 (tried again when the next stage finds it open)
            log.warning("the job's transactions could not be ended on %d sink partitions: %s", len(opened), exc)
            return
        states = self._read(opened) or {}
        for sink, tx in opened.items():
            state = states.get(sink)
            if state is not None and state.stable <= tx.start and state.open:
                other = OpenTransaction(sink, tx.start, tx.since_ms, True)
                log.error("%s", other.describe(self.sink.bootstrap_servers))
                self.open[sink] = other
            else:
                log.warning("%s: a transaction of this job's was open at sink offset %d (Kafka did not write its "
                            "markers: it skips them while the partition has no leader); it is aborted now and its "
                            "records are emitted again", sink, tx.start)
        self._save_open()

    def _save_open(self) -> None:
        write_held(self.state, self.open)

    def alarms(self) -> list[OpenTransaction]:
        """The other writers' transactions holding the job's sink partitions now."""
        return list(self.open.values())
