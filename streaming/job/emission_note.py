"""The log's note of its emission: how far the sink committed the log's records, and what it holds of them. A mark
of the log's manifest, committed with the stage's other changes to the log after its emission (a file of its own,
emitted.json, was one more durable write a partition a stage; a log last committed by an older kcompact has its
note there still)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from streaming.log import PartitionLog
from streaming.log.manifest import mark_or_file
from streaming.log.storage import Storage
from streaming.state.layout import emitted_file

MARK = "emission"


@dataclass(frozen=True)
class EmissionNote:
    """The log's note of its emission, written after each stage's: how far emission got, and the last record
    the sink holds. The records between came from the sink's cluster (``looped_to``) and were left out
    (streaming.kafka.sink.task_emitter.SinkPartition): the sink's own progress read cannot see past them, and
    this note is what keeps a partition whose sink is written by others from reading them again each stage."""

    emitted_up_to: int
    written_up_to: int
    looped_to: str | None  # the sink cluster's id; None: a note from before records were left out
    sink_topic_id: str | None = None  # the sink topic the note is of (None: a note from before it named it)
    sink_floor: int | None = None  # a sink offset at or below the job's last record there (None: not known)
    sink_reached: int | None = None  # a high watermark the sink had reached after it (None: sink_floor + 1)

    @classmethod
    def of(cls, marks: Mapping[str, Any], storage: Storage, log_dir: str) -> "EmissionNote | None":
        """From a manifest's marks, or the file an older kcompact wrote beside the log; None: no note."""
        doc = mark_or_file(marks, MARK, storage, emitted_file(log_dir))
        return None if doc is None else cls.from_doc(doc)

    def save(self, plog: PartitionLog, at_ms: int) -> None:
        """Committed with the log (with the task's other changes, where it holds them)."""
        plog.note([], {MARK: {"emitted_up_to": self.emitted_up_to, "written_up_to": self.written_up_to,
                              "looped_to": self.looped_to, "sink_topic_id": self.sink_topic_id,
                              "sink_floor": self.sink_floor, "sink_reached": self.sink_reached, "at_ms": at_ms}})

    @classmethod
    def from_doc(cls, doc: Mapping) -> "EmissionNote":
        """A note as saved; one of an older kcompact lacks the fields it did not know."""
        return cls(doc["emitted_up_to"], doc.get("written_up_to", doc["emitted_up_to"]), doc.get("looped_to"),
                   doc.get("sink_topic_id"), doc.get("sink_floor"), doc.get("sink_reached"))

    def kept_by(self, topic_id: str, log_start: int, high: int) -> bool:
        """The sink partition still holds every offset of the job's last records there: the same topic, its log
        start not past them, its end not below them. Then a lower offset found by the progress read means the
        broker's cleaner removed the job's later records (another writer wrote their keys since), never lowering
        the end, not that the sink was emptied, truncated (records deleted, an unclean leader election) or made
        again: what this note says was committed is not sent again."""
        marks = self.sink_marks
        return self.sink_topic_id == topic_id and marks is not None and log_start <= marks[0] and high >= marks[1]

    @property
    def sink_marks(self) -> tuple[int, int] | None:
        """sink_floor and sink_reached (sink_floor + 1 where a note from before did not say), None: not known."""
        if self.sink_floor is None:
            return None
        return self.sink_floor, self.sink_floor + 1 if self.sink_reached is None else self.sink_reached

    def written_for(self, emitted_up_to: int, sink_cluster_id: str) -> int | None:
        """The last record the sink holds when emission got to ``emitted_up_to`` (the driver's word), if this
        note knows it; None otherwise (none left out, as far as the job can tell)."""
        same = self.emitted_up_to == emitted_up_to and self.looped_to == sink_cluster_id
        return self.written_up_to if same else None

    def resumes_after(self, found: int, sink_cluster_id: str) -> int:
        """Where emission resumes when the sink's last record of the job's carries ``found``: past the records
        this note left out when nothing but they follow it (an origin never changes: read again, they would
        be left out again), else right after it (the sink was emptied, truncated or written further)."""
        passed = self.looped_to == sink_cluster_id and self.written_up_to <= found <= self.emitted_up_to
        return self.emitted_up_to if passed else found


def emission_note(plog: PartitionLog) -> EmissionNote | None:
    """The log's note as its writer's view has it (None: the sink was never written from this log)."""
    return EmissionNote.of(plog.journal_marks, plog.storage, plog.dir)
