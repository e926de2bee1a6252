"""The driver's side of the job's transactional ids: how many slots it has used at most (task i of a stage
writes with slot i's id, streaming.kafka.sink.transactional_ids), kept in the state dir, and when they are fenced.

The rule (docs/sink.md): every id that may have written a partition is fenced before the partition's next
writer reads where to resume. A retried attempt of a task has the id of the attempt it replaces and fences it
itself. Across stages a partition may move to another task: the driver fences every id the job has ever used
(the highest slot count is kept, so a job that now runs fewer tasks still fences the ids of its larger days)
before the first stage of a run, and before any stage that follows one that did not end cleanly (a task
retried, fenced or failed while emitting, a stage that raised): only then can a writer of an earlier stage
still be alive. A stage that ended cleanly leaves none: each of its tasks committed or aborted before it
returned.

A fence ends the writers that have begun; a task of an earlier stage that was frozen before its own
init_transactions (a lost executor's, thawed) begins after it. So the driver counts its fences in the same
document, written before it fences, and a task checks right after its own init_transactions that the count
is still the one it was made with (is_stale): one made before a later fence ends there, writing nothing.
"""

from __future__ import annotations

import logging
from typing import Iterable, Mapping

from streaming.job.compact import StageReport
from streaming.job.task_error import ErrorKind
from streaming.kafka.sink.transactional_ids import fence, job_ids
from streaming.log.storage import read_json, write_json
from streaming.state.layout import transactional_slots_file
from streaming.state.stores import StateDir

log = logging.getLogger(__name__)

# A task that failed so may have left a writer behind, or a transaction to the coordinator's timeout
UNCLEAN = frozenset({ErrorKind.FENCED, ErrorKind.FAILED, ErrorKind.SINK_UNREACHABLE, ErrorKind.TASK_LOST})


class TransactionSlots:
    def __init__(self, state: StateDir, job_id: str, client_config: Mapping[str, str]) -> None:
        self.state, self.job_id, self.client_config = state, job_id, dict(client_config)
        doc = _read(state, job_id)
        self.used: int = doc.get("slots", 0)
        self.fences: int = doc.get("fences", 0)
        self.unclean = True  # the run's start: the last run's tasks may still be writing

    @property
    def ids(self) -> list[str]:
        """Every id the job has written with."""
        return job_ids(self.job_id, self.used)

    def fence_if_needed(self) -> None:
        """Before a stage's sinks are read: every id fenced if a writer of an earlier stage may be alive."""
        if self.unclean:
            self.fences += 1
            self._save()
            if self.used:
                fence(self.client_config, self.ids)
        self.unclean = False

    def note_slots(self, tasks: int) -> None:
        """The stage's slot count kept if it is the highest yet, before any of its tasks writes."""
        if tasks > self.used:
            self.used = tasks
            self._save()

    def _save(self) -> None:
        write_json(self.state.storage, transactional_slots_file(self.state),
                   {"job_id": self.job_id, "slots": self.used, "fences": self.fences})

    def after_stage(self, reports: Iterable[StageReport], raised: bool = False) -> None:
        if raised or any(r.attempt > 0 or (r.error is not None and r.error.kind in UNCLEAN) for r in reports):
            self.unclean = True


def _read(state: StateDir, job_id: str) -> dict:
    doc = read_json(state.storage, transactional_slots_file(state)) or {}
    return doc if doc.get("job_id") == job_id else {}


def is_stale(state: StateDir, job_id: str, fences: int) -> bool:
    """A task made when the driver had fenced ``fences`` times, asked after its own fence: the driver has
    fenced the job's ids since, so a later stage may be writing its partitions."""
    return _read(state, job_id).get("fences", 0) > fences
