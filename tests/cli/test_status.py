"""`kcompact status` and `dump` read a state dir as it is on disk, without Spark or Kafka."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys

import pytest

from streaming import __version__
from streaming.errors import UsageError
from streaming.cleaner import CompactionConfig, LogCleanerManager
from streaming.partition_id import PartitionId
from streaming.cli.dump import dump_records
from streaming.cli.status import collect_status, render_table
from streaming.job.spec import JobMapping, JobSpec, TopicPlan
from streaming.configuration.subscription import Subscribe
from streaming.log import make_record
from streaming.log.storage import write_json
from streaming.state.layout import LogDir, emitted_file, open_partition_log
from streaming.state.stores import open_state_dir

NOW = 1_800_000_000_000


def _state_dir(tmp_path) -> str:
    return write_state_dir(str(tmp_path))


def write_state_dir(uri: str) -> str:
    """A job's state dir: its saved spec, one cleaned partition log with an emission note, one dirty one."""
    state = open_state_dir(uri)
    config = CompactionConfig.from_mapping({"min.cleanable.dirty.ratio": "0"})
    mapping = JobMapping("127.0.0.1:1", Subscribe(("orders",)), "127.0.0.1:1", "orders.compacted")
    JobSpec(mapping, uri, {"orders": TopicPlan("orders", "orders.compacted", config, 2)},
            source_kafka={"sasl.password": "hunter2"}).save(state)
    for partition in (0, 1):
        plog = open_partition_log(state, LogDir.of(state, PartitionId("orders", partition)), config.log_config)
        plog.append([make_record(o, b"k%d" % (o % 2), b"v%d" % o, NOW - 10_000) for o in range(6)], now_ms=NOW)
        plog.roll()
    cleaned = open_partition_log(state, LogDir.of(state, PartitionId("orders", 0)), config.log_config)
    LogCleanerManager(config).clean_partition(PartitionId("orders", 0), cleaned, NOW)
    write_json(state.storage, emitted_file(cleaned.dir), {"emitted_up_to": 5, "at_ms": NOW})
    return uri


def test_status_reports_each_partition_from_its_files(tmp_path) -> None:
    status = collect_status(_state_dir(tmp_path), NOW)
    p0, p1 = status.partitions
    assert status.topics["orders"].sink == "orders.compacted" and p0.sink_topic == "orders.compacted"
    assert (p0.partition, p0.records, p0.dirty_bytes, p0.passes, p0.emitted_up_to, p0.emit_lag) == (0, 2, 0, 1, 5, 0)
    assert (p1.records, p1.dirty_ratio, p1.passes, p1.emitted_up_to) == (6, 1.0, 0, None)
    assert status.metrics["max-dirty-percent"] == 100.0 and status.metrics["uncleanable-partitions-count"] == 0
    table = render_table(status)
    assert table.splitlines()[1:3] == ["1 topic(s), 2 partitions: 2 ok; ingest lag 0 records, emit lag 0 records",
                                       "  orders -> orders.compacted (2 partitions)"] and "orders-1" in table
    assert "hunter2" not in json.dumps(status.to_doc()) + (tmp_path / "kcompact.json").read_text()


def test_status_table_names_the_cleanable_range_and_rounds_figures_for_a_person(tmp_path) -> None:
    status = collect_status(_state_dir(tmp_path), NOW)
    status.metrics["cleaner-recopy-percent"] = 100 * 1024 / 1073741824  # 9.5367431640625e-05
    header, row = render_table(status).splitlines()[3:5]
    assert "cleanable<" in header and "uncleanable" not in header
    end = header.index("cleanable<") + len("cleanable<")  # cells are right-aligned under their header
    assert row[:end].split()[-1] == "6"
    metrics = render_table(status).splitlines()[-1]
    assert "cleaner-recopy-percent=9.54e-05," in metrics and "max-dirty-percent=100," in metrics, metrics
    assert json.loads(json.dumps(status.to_doc()))["metrics"]["cleaner-recopy-percent"] == 100 * 1024 / 1073741824


def test_status_of_many_partitions_lists_those_that_need_a_look_and_topic_narrows_it(tmp_path) -> None:
    status = collect_status(_state_dir(tmp_path), NOW)
    many = [dataclasses.replace(status.partitions[0], partition=p, emit_lag=0) for p in range(300)]
    many[7].emit_lag = 4
    status = dataclasses.replace(status, partitions=many)
    table = render_table(status).splitlines()
    assert table[1].startswith("1 topic(s), 300 partitions: 300 ok; ingest lag 0 records, emit lag 4 records")
    assert [line.split()[0] for line in table[4:5]] == ["orders-7"], "the one partition behind, alone"
    assert table[5] == "(299 more partitions not shown: every other is ok, ingested and emitted; --topic narrows, " \
                       "--json lists every one)"
    assert collect_status(_state_dir(tmp_path), NOW, ["ord.*"]).topics.keys() == {"orders"}
    with pytest.raises(UsageError, match="topic 'nope' is not mirrored by the job of .*; they are orders"):
        collect_status(_state_dir(tmp_path), NOW, ["nope"])


def test_dump_prints_what_the_logs_hold(tmp_path) -> None:
    rows = list(dump_records(_state_dir(tmp_path), partition=0))
    assert [(r["offset"], r["key"], r["value"]) for r in rows] == [(4, "k0", "v4"), (5, "k1", "v5")]


def test_status_dump_help_and_version_import_neither_spark_nor_kafka(tmp_path) -> None:
    state = _state_dir(tmp_path)
    shows = {("--help",): lambda out: out.startswith("usage: kcompact"),
             ("--version",): lambda out: out.strip() == f"kcompact {__version__}",
             ("status", "--state-dir", state): lambda out: "  orders -> orders.compacted (2 partitions)" in out,
             ("status", "--json", "--state-dir", state): lambda out: len(json.loads(out)["partitions"]) == 2,
             ("dump", "--state-dir", state): lambda out: [json.loads(line)["offset"] for line in out.splitlines()]
             == [4, 5, 0, 1, 2, 3, 4, 5]}
    probe = ("import sys\nfrom streaming.cli.main import main\ntry:\n    code = main(sys.argv[1:])\n"
             "except SystemExit as exc:\n    code = exc.code\n"
             "heavy = sorted({m.split('.')[0] for m in sys.modules} & {'pyspark', 'py4j', 'confluent_kafka'})\n"
             "print('EXIT', code, 'HEAVY', heavy, file=sys.stderr)")
    for argv, shown in shows.items():
        out = subprocess.run([sys.executable, "-c", probe, *argv], capture_output=True, text=True, timeout=120)
        assert "EXIT 0 HEAVY []" in out.stderr, (argv, out.stderr[-2000:])
        assert shown(out.stdout), (argv, out.stdout[-2000:])


def test_status_of_a_dir_that_is_no_state_dir_is_one_line(tmp_path) -> None:
    out = subprocess.run([sys.executable, "-m", "streaming", "status", "--state-dir", str(tmp_path)],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode != 0 and len(out.stderr.strip().splitlines()) == 1 and "kcompact.json" in out.stderr
