"""The Iceberg snapshot against the reference model: three runs with updates, deletes and a new partition,
read back with pyiceberg; a run killed between its data files and its commit leaves the table as it was,
and the next run completes it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlparse

import pytest
from pyiceberg.catalog import load_catalog

from streaming.errors import UserError
from streaming.iceberg import snapshot_to
from streaming.iceberg.snapshot import CATALOG_NAME, OFFSETS_PROPERTY
from streaming.iceberg.target import IcebergTarget
from streaming.runtime.moments import HOLD_ENV, REACHED, Moment
from streaming.partition_id import PartitionId
from streaming.table.values import ValueFormat, ValueSpec
from tests.table.state_dirs import STRATEGIES, StateDirModel, expected, state_dir, table_rows


def _target(tmp_path) -> IcebergTarget:
    return IcebergTarget("state.orders", f"sqlite:///{tmp_path}/catalog.db")


def _table(target: IcebergTarget):
    return load_catalog(CATALOG_NAME, **target.settings()).load_table(target.table)


def _rows(target: IcebergTarget) -> set[tuple]:
    return table_rows(_table(target).scan().to_arrow().to_pylist())


def files_of(table) -> set:
    """The data files a table's current snapshot references, as paths."""
    return {Path(urlparse(task.file.file_path).path) for task in table.scan().plan_files()}


def _grow(model: StateDirModel, partitions: int) -> None:
    """Another run's worth of records (updates of known keys, tombstones, new keys) on every partition, and
    the job's topics grown to ``partitions`` partitions."""
    model.partitions = partitions
    model.save()
    for topic in STRATEGIES:
        for p in range(partitions):
            model.append(PartitionId(topic, p), 30, keys=16)


def test_three_snapshots_with_updates_deletes_and_a_new_partition_equal_the_model(tmp_path) -> None:
    model = state_dir(str(tmp_path / "state"))
    target = _target(tmp_path)
    first = snapshot_to(model.uri, target, ValueSpec(ValueFormat.BINARY))
    assert _rows(target) == expected(model) and first.rows == len(expected(model))
    _grow(model, 2)
    second = snapshot_to(model.uri, target, ValueSpec(ValueFormat.BINARY))
    assert second.deleted > 0, "the fixture tombstones keys the first snapshot held"
    assert _rows(target) == expected(model)
    _grow(model, 3)
    snapshot_to(model.uri, target, ValueSpec(ValueFormat.BINARY))
    assert _rows(target) == expected(model)
    assert {r[1] for r in _rows(target)} == {0, 1, 2}
    offsets = _table(target).properties[OFFSETS_PROPERTY]
    assert '"2": ' in offsets
    metadata = _table(target).metadata_location
    again = snapshot_to(model.uri, target, ValueSpec(ValueFormat.BINARY))  # nothing new: nothing written, nothing committed
    assert (again.rows, again.unchanged) == (0, len(model.records))
    assert _table(target).metadata_location == metadata


def test_json_values_are_a_struct_column_of_the_table(tmp_path) -> None:
    model = state_dir(str(tmp_path / "state"))
    target = _target(tmp_path)
    snapshot_to(model.uri, target, ValueSpec(ValueFormat.JSON))
    _grow(model, 2)
    snapshot_to(model.uri, target, ValueSpec(ValueFormat.JSON))
    rows = _table(target).scan().to_arrow().to_pylist()
    want = {(r[0], r[1], r[2]) for r in expected(model)}
    assert {(r["topic"], r["partition"], r["offset"]) for r in rows} == want
    assert all(r["value"]["name"] == f"v{r['offset']}" for r in rows)


def test_a_field_added_later_is_added_to_the_table_by_schema_evolution_and_a_changed_type_is_refused(tmp_path) -> None:
    model = state_dir(str(tmp_path / "state"))
    target = _target(tmp_path)
    snapshot_to(model.uri, target, ValueSpec(ValueFormat.JSON))
    model.append(PartitionId("by-time", 1), 40, keys=4, added={"tier": "gold"})
    snapshot_to(model.uri, target, ValueSpec(ValueFormat.JSON))
    table = _table(target)
    assert [f.name for f in table.schema().find_field("value").field_type.fields] == ["n", "name", "ok", "tier"]
    tiers = {(r["partition"], r["topic"]): r["value"]["tier"] for r in table.scan().to_arrow().to_pylist()
             if r["value"]["tier"] is not None}
    assert set(tiers) == {(1, "by-time")}  # rows written before the field read it as null
    metadata = table.metadata_location
    model.append(PartitionId("by-offset", 0), 10, added={"tier": 3})
    with pytest.raises(UserError, match="column tier of table .* is string, and the source now gives int64"):
        snapshot_to(model.uri, target, ValueSpec(ValueFormat.JSON))
    assert _table(target).metadata_location == metadata


def test_a_partition_rewritten_among_several_manifests_is_not_raced_by_pyicebergs_threads(tmp_path, monkeypatch) -> None:
    """pyiceberg's delete evaluates the manifests through one evaluator that keeps the manifest it reads in an
    attribute; the pause between setting it and reading it makes threads sharing it read each other's bounds
    every time, where under load they did once in a while."""
    from pyiceberg.expressions import visitors

    def paused(self, manifest):
        if partitions := manifest.partitions:
            self.partition_fields = partitions
            time.sleep(0.02)
            return visitors.visit(self.partition_filter, self)
        return visitors.ROWS_MIGHT_MATCH

    monkeypatch.setattr(visitors._ManifestEvalVisitor, "eval", paused)
    model = state_dir(str(tmp_path / "state"))
    target = _target(tmp_path)
    snapshot_to(model.uri, target, ValueSpec(ValueFormat.BINARY))
    model.append(PartitionId("by-time", 1), 40, keys=4)
    snapshot_to(model.uri, target, ValueSpec(ValueFormat.BINARY))
    assert _rows(target) == expected(model)
    operations = [s.summary.operation.value for s in _table(target).snapshots() if s.summary is not None]
    assert "overwrite" in operations, f"the keys' delete rewrote a data file, where the race is: {operations}"


def test_a_snapshot_killed_before_its_commit_leaves_the_table_as_it_was_and_the_next_completes_it(tmp_path) -> None:
    model = state_dir(str(tmp_path / "state"))
    target = _target(tmp_path)
    snapshot_to(model.uri, target, ValueSpec(ValueFormat.BINARY))
    before = _table(target)
    rows_before = _rows(target)
    _grow(model, 3)
    hold = tmp_path / "hold"
    hold.mkdir()
    env = {**os.environ, HOLD_ENV: f"{Moment.SNAPSHOT_COMMIT.value}:{hold}"}
    proc = subprocess.Popen([sys.executable, "-m", "streaming", "snapshot", "--state-dir", model.uri,
                             "--iceberg-table", target.table, "--iceberg-catalog", target.catalog],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 120
        while not (hold / REACHED).exists():
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline
            time.sleep(0.05)
        files_before_the_kill = set((tmp_path / "warehouse").rglob("*.parquet"))
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
    after = _table(target)
    assert after.metadata.current_snapshot_id == before.metadata.current_snapshot_id
    assert after.properties[OFFSETS_PROPERTY] == before.properties[OFFSETS_PROPERTY]
    assert _rows(target) == rows_before
    assert files_before_the_kill - files_of(before), "it had written data files, which no commit took"
    snapshot_to(model.uri, target, ValueSpec(ValueFormat.BINARY))
    assert _rows(target) == expected(model)


def test_without_pyiceberg_the_command_says_what_to_install(tmp_path, monkeypatch, capsys) -> None:
    from streaming.cli.main import main

    model = state_dir(str(tmp_path / "state"))
    capsys.readouterr()
    real = __import__("importlib.util").util.find_spec
    monkeypatch.setattr("importlib.util.find_spec", lambda name, *a: None if name == "pyiceberg" else real(name, *a))
    assert main(["snapshot", "--state-dir", model.uri, "--iceberg-table", "ns.t"]) == 2
    err = capsys.readouterr().err
    assert err == "kcompact: error: Iceberg snapshots need pyiceberg, which is not installed: pip install " \
                  "'kcompact[table]'\n"


@pytest.mark.parametrize("table", ["orders", ".orders", "ns."])
def test_a_table_name_without_its_namespace_is_refused(table) -> None:
    with pytest.raises(Exception, match="is not NAMESPACE.TABLE"):
        IcebergTarget(table)


def test_a_key_whose_tombstone_left_the_log_before_the_snapshot_is_deleted_all_the_same(tmp_path) -> None:
    from streaming.cleaner import CompactionConfig, LogCleanerManager
    from streaming.log import make_record
    from streaming.state.layout import LogDir, open_partition_log
    from streaming.state.stores import open_state_dir
    from tests.table.state_dirs import NOW

    model = state_dir(str(tmp_path / "state"))
    target = _target(tmp_path)
    snapshot_to(model.uri, target, ValueSpec(ValueFormat.BINARY))
    pid = PartitionId("by-offset", 0)
    key = next(r[4] for r in expected(model) if r[:2] == ("by-offset", 0))
    state = open_state_dir(model.uri)
    quick = CompactionConfig.from_mapping({"min.cleanable.dirty.ratio": "0", "delete.retention.ms": "0"})
    log = open_partition_log(state, LogDir.of(state, pid), quick.log_config)
    tombstone = make_record(log.log_end_offset, key, None, NOW)
    log.append([tombstone], now_ms=NOW)
    log.roll()
    model.records[pid].append(tombstone)
    for later in (NOW + 1, NOW + 2):  # the first pass sets the tombstone's horizon, the second removes it
        assert LogCleanerManager(quick).clean_partition(pid, log, later).error is None
    assert not [r for r in log.read() if r["key"] == key], "the tombstone has left the log"
    report = snapshot_to(model.uri, target, ValueSpec(ValueFormat.BINARY))
    assert report.deleted == 1
    assert _rows(target) == expected(model)


@pytest.mark.integration
def test_a_warehouse_on_object_storage_is_named_by_its_uri(tmp_path, s3_server) -> None:
    """The store's endpoint and region reach pyiceberg as its own settings of the catalog `kcompact`, here
    from the environment (~/.pyiceberg.yaml does the same)."""
    store = {"s3.endpoint": f"http://{s3_server.endpoint}", "s3.region": "us-east-1"}
    env = {**os.environ, **{f"PYICEBERG_CATALOG__KCOMPACT__{k.upper().replace('.', '__')}": v for k, v in store.items()}}
    bucket = s3_server.new_bucket()
    model = state_dir(str(tmp_path / "state"))
    target = IcebergTarget("state.orders", f"sqlite:///{tmp_path}/catalog.db", f"s3://{bucket}/warehouse")
    for run in range(2):
        if run:
            _grow(model, 2)
        done = subprocess.run([sys.executable, "-m", "streaming", "snapshot", "--state-dir", model.uri,
                               "--iceberg-table", target.table, "--iceberg-catalog", target.catalog,
                               "--iceberg-warehouse", target.warehouse], env=env, capture_output=True, text=True,
                              timeout=120)
        assert done.returncode == 0 and done.stderr == "", done.stderr
    table = load_catalog(CATALOG_NAME, **target.settings(), **store).load_table(target.table)
    assert table_rows(table.scan().to_arrow().to_pylist()) == expected(model)
    stored = [o["Key"] for o in s3_server.client().list_objects_v2(Bucket=bucket)["Contents"]]
    assert any(k.startswith("warehouse/") and k.endswith(".parquet") for k in stored)
    assert not (tmp_path / "warehouse").exists()
