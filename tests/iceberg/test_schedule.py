"""The job's table sync (--snapshot-every): a snapshot after a stage once the interval has passed, one more
at the end of the run unless the last stage's is taken, and a failure that is one warning, not the job's end."""

from __future__ import annotations

import logging

from pyiceberg.catalog import load_catalog

from streaming.iceberg.schedule import TableSyncSchedule
from streaming.iceberg.snapshot import CATALOG_NAME
from streaming.iceberg.target import IcebergTarget
from streaming.partition_id import PartitionId
from streaming.table.values import ValueFormat, ValueSpec
from tests.table.state_dirs import state_dir

TOPICS = frozenset({"by-offset", "by-time", "by-header"})


def _snapshots(target: IcebergTarget) -> int:
    return len(load_catalog(CATALOG_NAME, **target.settings()).load_table(target.table).snapshots())


def test_a_snapshot_after_the_first_stage_then_once_the_interval_has_passed_and_at_the_end(tmp_path) -> None:
    model = state_dir(str(tmp_path / "state"))
    target = IcebergTarget("s.t", f"sqlite:///{tmp_path}/catalog.db")
    sync = TableSyncSchedule(target, ValueSpec(ValueFormat.BINARY), interval_s=3600)
    sync.after_stage(model.uri, TOPICS)
    first = _snapshots(target)
    model.append(PartitionId("by-time", 0), 10)
    sync.after_stage(model.uri, TOPICS)  # within the interval: none
    assert _snapshots(target) == first
    sync.finish(model.uri, TOPICS)  # the run ends behind the last stage: one more
    assert _snapshots(target) > first
    taken = _snapshots(target)
    sync.finish(model.uri, TOPICS)  # nothing ran since: none
    assert _snapshots(target) == taken


def test_a_snapshot_that_fails_is_one_warning_and_the_next_stage_tries_again(tmp_path, caplog) -> None:
    model = state_dir(str(tmp_path / "state"))
    sync = TableSyncSchedule(IcebergTarget("s.t", "catalog.db"), ValueSpec(ValueFormat.BINARY), interval_s=0)
    with caplog.at_level(logging.WARNING, logger="streaming.iceberg.schedule"):
        sync.after_stage(model.uri, TOPICS)
        sync.after_stage(model.uri, TOPICS)
    warnings = [r.getMessage() for r in caplog.records if r.name == "streaming.iceberg.schedule"]
    assert len(warnings) == 2 and all("snapshot of table s.t failed, to be taken again after the next stage: "
                                      "--iceberg-catalog 'catalog.db' is not a URI" in w for w in warnings)
