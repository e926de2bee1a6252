"""The job's table sync (--snapshot-every): a snapshot after a stage once the interval has passed, one more
at the end of the run unless the last stage's is taken, a failure that is one warning when it starts, not the
job's end, and a table per topic by a template, one blocked by a type change while the others flow."""

from __future__ import annotations

import logging

from pyiceberg.catalog import load_catalog

from streaming.configuration.output_names import namespace_table_problem
from streaming.iceberg.schedule import TableSyncSchedule
from streaming.iceberg.snapshot import CATALOG_NAME
from streaming.iceberg.target import IcebergTarget
from streaming.partition_id import PartitionId
from streaming.configuration.output_names import OutputName
from streaming.table.values import ValueFormat, ValueSpec
from tests.table.state_dirs import state_dir

TOPICS = frozenset({"by-offset", "by-time", "by-header"})


def _snapshots(target: IcebergTarget) -> int:
    return len(load_catalog(CATALOG_NAME, **target.settings()).load_table(target.table).snapshots())


def test_a_snapshot_after_the_first_stage_then_once_the_interval_has_passed_and_at_the_end(tmp_path) -> None:
    model = state_dir(str(tmp_path / "state"))
    target = IcebergTarget("s.t", f"sqlite:///{tmp_path}/catalog.db")
    sync = _schedule("s.t", target.catalog, ValueFormat.BINARY, interval_s=3600)
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


def _schedule(table: str, catalog: str, fmt: ValueFormat, interval_s: float = 0) -> TableSyncSchedule:
    return TableSyncSchedule(OutputName(table, "--iceberg-table", namespace_table_problem), catalog, None,
                             ValueSpec(fmt), interval_s)


def _warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "streaming.iceberg.schedule" and r.levelno >= logging.WARNING]


def test_a_snapshot_that_fails_is_one_warning_when_it_starts_and_the_next_stage_tries_again(tmp_path, caplog) -> None:
    model = state_dir(str(tmp_path / "state"))
    sync = _schedule("s.t", "catalog.db", ValueFormat.BINARY)
    with caplog.at_level(logging.DEBUG, logger="streaming.iceberg.schedule"):
        sync.after_stage(model.uri, TOPICS)
        sync.after_stage(model.uri, TOPICS)
    assert len(_warnings(caplog)) == 1
    assert "snapshot of table s.t failed, to be taken again after the next stage (since " in _warnings(caplog)[0]
    assert "--iceberg-catalog 'catalog.db' is not a URI" in _warnings(caplog)[0]
    assert [(t.table, t.state) for t in sync.states()] == [("s.t", "FAILING")]
    assert any("still FAILING" in r.getMessage() for r in caplog.records)  # tried again, said at DEBUG


def test_a_table_per_topic_and_one_blocked_by_a_type_change_leaves_the_others_flowing(tmp_path, caplog) -> None:
    model = state_dir(str(tmp_path / "state"))
    catalog = f"sqlite:///{tmp_path}/catalog.db"
    sync = _schedule("s.{table}", catalog, ValueFormat.JSON)
    sync.after_stage(model.uri, TOPICS)
    assert {t.state for t in sync.states()} == {"ok"} and len(sync.states()) == 3
    model.append(PartitionId("by-time", 0), 10, added={"ok": "text now"})  # a boolean field becomes text
    model.append(PartitionId("by-offset", 1), 10, added={"more": 1})
    with caplog.at_level(logging.DEBUG, logger="streaming.iceberg.schedule"):
        sync.after_stage(model.uri, TOPICS)
        sync.after_stage(model.uri, TOPICS)
    states = {t.table: t for t in sync.states()}
    assert states["s.by-time"].state == "BLOCKED" and "column ok of table s.by-time is bool" in states["s.by-time"].reason
    assert states["s.by-offset"].state == "ok" and states["s.by-header"].state == "ok"
    assert len(_warnings(caplog)) == 1 and "snapshot of table s.by-time blocked (since " in _warnings(caplog)[0]
    table = load_catalog(CATALOG_NAME, **IcebergTarget("s.by-offset", catalog).settings()).load_table("s.by-offset")
    assert "more" in table.scan().to_arrow().schema.field("value").type.names  # the other topic's change arrived
