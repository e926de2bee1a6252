"""What the cleaner remembers about a partition between passes, kept with its log.

On disk rather than in memory because each partition is cleaned by a Spark task that may run on any
executor, and because `kcompact status` must show it while the job is down. It is a mark of the log's manifest,
committed with the pass (a file of its own was one more durable write a partition a stage); a log last committed
by an older kcompact has it in its own file still.
"""

from __future__ import annotations

import posixpath
from dataclasses import asdict, dataclass, fields
from typing import Any, Mapping

from streaming.log import PartitionLog
from streaming.log.manifest import mark_or_file
from streaming.log.storage import Storage

STATE_FILE = "cleaner-state.json"  # where a kcompact before the mark kept it
MARK = "cleaner"


@dataclass
class PartitionCleanerState:
    passes: int = 0
    last_clean_ms: int | None = None
    uncleanable_since_ms: int | None = None
    uncleanable_error: str | None = None
    retry_at_ms: int | None = None
    keyless_records: int = 0
    dead_letter_records: int = 0
    invalid_version_headers: int = 0
    tombstones_removed: int = 0

    @property
    def uncleanable(self) -> bool:
        return self.uncleanable_since_ms is not None

    def in_backoff(self, now_ms: int) -> bool:
        return self.retry_at_ms is not None and now_ms < self.retry_at_ms

    @classmethod
    def load(cls, plog: PartitionLog) -> "PartitionCleanerState":
        return cls.of(plog.journal_marks, plog.storage, plog.dir)

    @classmethod
    def of(cls, marks: Mapping[str, Any], storage: Storage, log_dir: str) -> "PartitionCleanerState":
        """From a manifest's marks, or the file an older kcompact wrote beside the log."""
        data = mark_or_file(marks, MARK, storage, posixpath.join(log_dir, STATE_FILE))
        if data is None:
            return cls()
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})

    def save(self, plog: PartitionLog) -> None:
        """Committed with the log (with the task's other changes, where it holds them)."""
        plog.note([], {MARK: asdict(self)})
