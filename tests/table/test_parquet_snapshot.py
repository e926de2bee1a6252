"""`kcompact snapshot --format parquet`: one file per partition holding the model's live winners, each
replaced whole, with the JSON schema of the first snapshot kept by the next."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from streaming.partition_id import PartitionId
from streaming.table.parquet_snapshot import END_OFFSET, write_parquet
from streaming.table.values import ValueFormat, ValueFormatError, ValueSpec
from tests.table.state_dirs import expected, state_dir, table_rows


def test_a_parquet_snapshot_holds_the_models_winners_in_one_file_per_partition(tmp_path) -> None:
    model = state_dir(str(tmp_path / "state"))
    report = write_parquet(model.uri, str(tmp_path / "out"), ValueSpec(ValueFormat.BINARY))
    files = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert files == sorted(f"{pid.topic}-{pid.partition}.parquet" for pid in model.records)
    assert table_rows(pq.read_table(tmp_path / "out").to_pylist()) == expected(model)
    assert report.rows == len(expected(model))
    meta = pq.read_schema(tmp_path / "out" / "by-offset-0.parquet").metadata
    assert int(meta[END_OFFSET]) == model.records[PartitionId("by-offset", 0)][-1]["offset"] + 1


def test_json_values_become_a_struct_whose_schema_the_next_snapshot_keeps(tmp_path) -> None:
    model = state_dir(str(tmp_path / "state"))
    out = tmp_path / "out"
    write_parquet(model.uri, str(out), ValueSpec(ValueFormat.JSON))
    value = pq.read_schema(out / "by-time-1.parquet").field("value").type
    assert [f.name for f in value] == ["n", "name", "ok"]
    rows = pq.read_table(out).to_pylist()
    want = {(r[0], r[1], r[2]): json.loads(r[5]) for r in expected(model)}
    assert {(r["topic"], r["partition"], r["offset"]): r["value"] for r in rows} == want
    model.append(PartitionId("by-time", 1), 20)  # the same fields: the kept schema takes them
    write_parquet(model.uri, str(out), ValueSpec(ValueFormat.JSON))
    assert pq.read_schema(out / "by-time-1.parquet").field("value").type == value
    assert len(pq.read_table(out).to_pylist()) == len(expected(model))
    with pytest.raises(ValueFormatError, match="holds values as json, not binary"):
        write_parquet(model.uri, str(out), ValueSpec(ValueFormat.BINARY))


def test_a_field_added_later_is_added_to_every_file_and_reads_null_in_rows_written_before(tmp_path) -> None:
    model = state_dir(str(tmp_path / "state"))
    out = tmp_path / "out"
    write_parquet(model.uri, str(out), ValueSpec(ValueFormat.JSON))
    model.append(PartitionId("by-time", 1), 40, keys=4, added={"tier": "gold"})
    write_parquet(model.uri, str(out), ValueSpec(ValueFormat.JSON))
    for path in out.glob("*.parquet"):  # the files of partitions that did not move are rewritten too
        assert [f.name for f in pq.read_schema(path).field("value").type] == ["n", "name", "ok", "tier"], path.name
    assert int(pq.read_schema(out / "by-offset-0.parquet").metadata[END_OFFSET]) == \
        model.records[PartitionId("by-offset", 0)][-1]["offset"] + 1
    rows = pq.read_table(out).to_pylist()
    want = {(r[0], r[1], r[2]): json.loads(r[5]) for r in expected(model)}
    assert {(r["topic"], r["partition"], r["offset"]): {k: v for k, v in r["value"].items() if v is not None or k != "tier"}
            for r in rows} == want


def test_a_snapshot_replaces_each_file_whole_and_leaves_no_temporary_file(tmp_path, monkeypatch) -> None:
    model = state_dir(str(tmp_path / "state"))
    out = tmp_path / "out"
    write_parquet(model.uri, str(out), ValueSpec(ValueFormat.BINARY))
    before = (out / "by-offset-1.parquet").read_bytes()
    model.append(PartitionId("by-offset", 1), 20)

    def fail(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr("streaming.table.parquet_snapshot.os.replace", fail)
    with pytest.raises(OSError):
        write_parquet(model.uri, str(out), ValueSpec(ValueFormat.BINARY))
    assert (out / "by-offset-1.parquet").read_bytes() == before
    assert sorted(p.name for p in out.iterdir() if not p.name.endswith(".parquet")) == []
    assert not [p for p in out.iterdir() if p.name.startswith(".")]


def test_a_partition_whose_log_has_not_moved_is_not_written_again(tmp_path) -> None:
    model = state_dir(str(tmp_path / "state"))
    out = tmp_path / "out"
    write_parquet(model.uri, str(out), ValueSpec(ValueFormat.BINARY))
    stamps = {p.name: p.stat().st_mtime_ns for p in out.iterdir()}
    model.append(PartitionId("by-header", 0), 10)
    report = write_parquet(model.uri, str(out), ValueSpec(ValueFormat.BINARY))
    assert report.unchanged == len(model.records) - 1
    assert [p.name for p in out.iterdir() if p.stat().st_mtime_ns != stamps[p.name]] == ["by-header-0.parquet"]
    assert table_rows(pq.read_table(out).to_pylist()) == expected(model)
