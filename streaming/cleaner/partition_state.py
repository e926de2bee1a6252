"""What the cleaner remembers about a partition between passes, kept beside its log.

On disk rather than in memory because each partition is cleaned by a Spark task that may run on any
executor, and because `kcompact status` must show it while the job is down.
"""

from __future__ import annotations

import posixpath
from dataclasses import asdict, dataclass, fields

from streaming.log.storage import Storage, read_json, write_json

STATE_FILE = "cleaner-state.json"


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
    def load(cls, storage: Storage, log_dir: str) -> "PartitionCleanerState":
        data = read_json(storage, posixpath.join(log_dir, STATE_FILE))
        if data is None:
            return cls()
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})

    def save(self, storage: Storage, log_dir: str) -> None:
        write_json(storage, posixpath.join(log_dir, STATE_FILE), asdict(self), indent=None)
