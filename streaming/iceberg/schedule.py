"""The Iceberg table kept in step by the job (--snapshot-every): after a compaction stage, once the interval
has passed since the last snapshot, and once more when the run ends. It reads the state dir the stage just
wrote, never Kafka again. A snapshot that fails (a catalog away, a value that does not fit) is said in one
line and taken at the next stage: the job itself goes on, and the table's offsets say where the next
snapshot starts."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

from streaming.errors import UserError
from streaming.iceberg import snapshot_to
from streaming.iceberg.target import IcebergTarget
from streaming.table.values import ValueSpec

log = logging.getLogger(__name__)


@dataclass
class TableSyncSchedule:
    target: IcebergTarget
    values: ValueSpec
    interval_s: float
    _last: float | None = field(default=None, init=False)
    _behind: bool = field(default=True, init=False)  # a stage ran since the last snapshot that succeeded

    def after_stage(self, state_dir: str, topics: frozenset[str]) -> None:
        self._behind = True
        if self._last is None or time.monotonic() - self._last >= self.interval_s:
            self._round(state_dir, topics)

    def finish(self, state_dir: str, topics: frozenset[str]) -> None:
        """The run ends: the table takes the last stages' state, unless the last snapshot already did."""
        if self._behind:
            self._round(state_dir, topics)

    def _round(self, state_dir: str, topics: frozenset[str]) -> None:
        self._last = time.monotonic()
        try:
            report = snapshot_to(state_dir, self.target, self.values, topics)
        except (UserError, OSError) as exc:
            log.warning("snapshot of table %s failed, to be taken again after the next stage: %s", self.target.table, exc)
            return
        except Exception:
            log.warning("snapshot of table %s failed, to be taken again after the next stage", self.target.table,
                        exc_info=True)
            return
        self._behind = False
        log.log(logging.INFO if report.rows or report.deleted else logging.DEBUG, "%s", report.describe())
