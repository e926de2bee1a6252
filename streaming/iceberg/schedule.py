"""The Iceberg tables kept in step by the job (--snapshot-every): after a compaction stage, once the interval
has passed since the last snapshot, and once more when the run ends. Each reads the state dir the stage just
wrote, never Kafka again. With a template (shop.{table}) each topic has its own table, and each table is
snapshotted on its own: one that fails does not hold the others back.

A snapshot that fails (a catalog away, a value that does not fit) is said in one line when it starts, and
taken again at the next stage: the job itself goes on, and the table's offsets say where the next snapshot
starts. A type change at the source BLOCKS its table until the user takes the way out the line names;
`kcompact status` and a metric show it meanwhile."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

from streaming.errors import UserError
from streaming.iceberg import snapshot_to
from streaming.iceberg.target import IcebergTarget
from streaming.job.metrics import TABLE_BLOCKED as BLOCKED, TABLE_FAILING as FAILING, TABLE_OK as OK, TableState
from streaming.table.evolution import SchemaChangeError
from streaming.configuration.output_names import OutputName
from streaming.table.values import ValueSpec
from streaming.utc import utc_text

log = logging.getLogger(__name__)


@dataclass
class TableSyncSchedule:
    name: OutputName
    catalog: str | None
    warehouse: str | None
    values: ValueSpec
    interval_s: float
    one_table: bool = False
    _last: float | None = field(default=None, init=False)
    _behind: bool = field(default=True, init=False)  # a stage ran since the last round that all succeeded
    _states: dict[str, TableState] = field(default_factory=dict, init=False)

    def after_stage(self, state_dir: str, topics: frozenset[str]) -> None:
        self._behind = True
        if self._last is None or time.monotonic() - self._last >= self.interval_s:
            self._round(state_dir, topics)

    def finish(self, state_dir: str, topics: frozenset[str]) -> None:
        """The run ends: the tables take the last stages' state, unless the last round already did."""
        if self._behind:
            self._round(state_dir, topics)

    def states(self) -> tuple[TableState, ...]:
        return tuple(self._states[t] for t in sorted(self._states))

    def _round(self, state_dir: str, topics: frozenset[str]) -> None:
        """Each table on its own: one whose name is wrong for its topics (a new topic of a pattern) fails
        alone, and a table no topic names any more is no longer shown."""
        self._last = time.monotonic()
        tables = self.name.groups(topics)
        self._states = {t: s for t, s in self._states.items() if t in tables}
        done = []
        for table, members in tables.items():
            problem = self.name.problem(table, members, self.values.columns_from_values, self.one_table)
            if problem:
                self._failed(table, FAILING, problem)
            done.append(problem is None and self._snapshot(state_dir, table, members))
        self._behind = not all(done)

    def _snapshot(self, state_dir: str, table: str, topics: frozenset[str]) -> bool:
        target = IcebergTarget(table, self.catalog, self.warehouse)
        try:
            report = snapshot_to(state_dir, target, self.values, topics)
        except SchemaChangeError as exc:
            self._failed(table, BLOCKED, str(exc))
            return False
        except (UserError, OSError) as exc:
            self._failed(table, FAILING, str(exc))
            return False
        except Exception as exc:  # noqa: BLE001 (pyiceberg's own failures: the job goes on, the line says it)
            self._failed(table, FAILING, f"{type(exc).__name__}: {exc}", trace=True)
            return False
        was = self._states.get(table)
        if was is not None and was.state != OK:
            log.info("snapshot of table %s taken again: %s no longer", table, was.state)
        self._states[table] = TableState(table, OK)
        log.log(logging.INFO if report.rows or report.deleted else logging.DEBUG, "%s", report.describe())
        return True

    def _failed(self, table: str, state: str, reason: str, trace: bool = False) -> None:
        """One WARNING when a table's failure starts or changes; the same failure again is DEBUG."""
        was = self._states.get(table)
        if was is not None and (was.state, was.reason) == (state, reason):
            log.debug("snapshot of table %s still %s: %s", table, state, reason)
            return
        since_ms = int(time.time() * 1000)
        self._states[table] = TableState(table, state, since_ms, reason)
        what = "blocked" if state == BLOCKED else "failed, to be taken again after the next stage"
        log.warning("snapshot of table %s %s (since %s UTC): %s", table, what, utc_text(since_ms), reason,
                    exc_info=trace)
