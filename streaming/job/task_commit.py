"""A task's commit of its partition logs, all at once: every log's objects and journal entries written, one
barrier crossed for all of them, then every log's manifest. A log that fsyncs each write asks the disk for each
object and manifest it writes; a task asks it once a commit, whatever its partition count.

The manifests made after the barrier are durable at the task's next barrier (or the file system's next sync):
a compaction task's, lost to a power cut, hold passes the next stage makes again and notes it finds again (the
sink is the record of what was emitted); an append task crosses one more barrier before Spark commits the
batch's offsets."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

from streaming.job import task_io
from streaming.log import PartitionLog
from streaming.log.storage import Barrier


@dataclass(frozen=True)
class TaskCommit:
    barrier: Barrier
    io_threads: int

    def __call__(self, logs: Sequence[PartitionLog], hold_on: bool = False) -> dict[PartitionLog, Exception]:
        """Each log's held changes committed (``hold_on``: the next ones held too); the logs that failed, each
        with its failure (a writer fenced, a full disk), for the caller to report or mend."""
        failed = self._each(lambda plog: plog.write_held_journal(), logs)
        try:
            self.barrier.cross()
        except OSError as exc:  # nothing written since the last barrier is known durable: no manifest may name it
            return {plog: exc for plog in logs}
        failed.update(self._each(lambda plog: plog.commit_held(hold_on), [p for p in logs if p not in failed]))
        return failed

    def _each(self, step: Callable[[PartitionLog], None], logs: Sequence[PartitionLog]) -> dict[PartitionLog, Exception]:
        outcomes = task_io.each(lambda plog: _failure_of(step, plog), logs, self.io_threads)
        return {plog: exc for plog, exc in zip(logs, outcomes, strict=True) if exc is not None}


def _failure_of(step: Callable[[PartitionLog], None], plog: PartitionLog) -> Exception | None:
    try:
        step(plog)
    except Exception as exc:  # noqa: BLE001 (one log's failure is its partition's, not the task's)
        return exc
    return None
