"""A compaction task's commit of its logs, all at once: every log's objects and journal entries written, one
barrier crossed for all of them, then every log's manifest. A log that fsyncs each write asks the disk for each
object and manifest of each log; a task asks it once a commit, whatever its partition count. The manifests after the barrier are durable at the task's next barrier (or the next syncfs of the file system): one
lost to a power cut is a commit the next stage makes again, as the sink is the record of what was emitted."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from streaming.job import task_io
from streaming.job.compact import PartitionWork
from streaming.log.storage import Barrier


@dataclass(frozen=True)
class TaskCommit:
    barrier: Barrier
    io_threads: int = task_io.DEFAULT_THREADS

    def __call__(self, works: list[PartitionWork], hold_on: bool = False) -> dict[PartitionWork, Exception]:
        """Each log's held changes committed (``hold_on``: the next ones held too); those that failed, each
        with its failure (a writer fenced, a full disk), are its partition's to report."""
        failed = self._each(lambda w: w.plog.write_held_journal(), works)
        try:
            self.barrier.cross()
        except OSError as exc:  # nothing written since the last barrier is known durable: no manifest may name it
            return {w: exc for w in works}
        failed.update(self._each(lambda w: w.plog.commit_held(hold_on), [w for w in works if w not in failed]))
        return failed

    def _each(self, step: Callable[[PartitionWork], None], works: list[PartitionWork]) -> dict[PartitionWork, Exception]:
        outcomes = task_io.each(lambda w: _failure_of(step, w), works, self.io_threads)
        return {w: exc for w, exc in zip(works, outcomes, strict=True) if exc is not None}


def _failure_of(step: Callable[[PartitionWork], None], work: PartitionWork) -> Exception | None:
    try:
        step(work)
    except Exception as exc:  # noqa: BLE001 (one log's failure is its partition's, not the task's)
        return exc
    return None
