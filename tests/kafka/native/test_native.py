"""The native path runs only with a confluent-kafka it was tested with: any other version takes the plain path
before a handle is read, said once in a WARNING naming what to install; ``--kafka-native off`` takes it
whatever the version. The version is faked here, in this process and, for a whole job, in every Python process
of it (a sitecustomize on PYTHONPATH, which Spark's workers inherit)."""

from __future__ import annotations

import logging
import os
import sys
import tomllib
from pathlib import Path

import confluent_kafka
import pytest
from packaging.requirements import Requirement
from packaging.version import Version

from streaming.kafka.native import gate
from streaming.kafka.clients import read_committed
from streaming.kafka.sink.plain_produce import PlainProduce
from streaming.kafka.sink.task_emitter import SinkPartition, TaskEmitter
from streaming.log import batch_from_records, make_record
from streaming.partition_id import PartitionId
from streaming.spark.source import kafka_source
from streaming.spark.source.options import KafkaSourceOptions
from tests.cli.test_first_contact import kcompact, lines
from tests.kafka_helpers import ORIGINS, Sent, produce

ROOT = Path(__file__).resolve().parents[3]
UNTESTED = "0.0.1"
PLAIN = "records move through confluent-kafka's per-record calls"


@pytest.fixture
def untested_client(monkeypatch):
    """This process's confluent-kafka says it is a version the native path was never tested with; the
    extension fails the test if anything reaches it."""
    monkeypatch.setattr(confluent_kafka, "version", lambda: UNTESTED)
    monkeypatch.setattr(gate, "columns", lambda: pytest.fail("the native path was used"))
    gate.unavailable.cache_clear()
    yield
    gate.unavailable.cache_clear()


def test_an_untested_version_is_named_with_what_to_install(untested_client, caplog) -> None:
    problem = gate.unavailable()
    assert problem == (f"confluent-kafka {UNTESTED} with librdkafka {confluent_kafka.libversion()[0]} is not a "
                       f"version its native path was tested with (pip install 'confluent-kafka=={gate.NEWEST}')")
    assert not gate.enabled(True) and not gate.enabled(False)
    caplog.set_level(logging.WARNING, logger=gate.__name__)
    gate.announce(True)
    gate.announce(False)
    assert [r.getMessage() for r in caplog.records] == [f"{PLAIN}, slower: {problem}; --kafka-native off silences this"]


def test_pyproject_allows_the_tested_releases_and_nothing_beyond_them() -> None:
    """A new confluent-kafka release never reaches a fresh install before it is tested."""
    with open(ROOT / "pyproject.toml", "rb") as f:
        [requirement] = [Requirement(d) for d in tomllib.load(f)["project"]["dependencies"]
                         if Requirement(d).name == "confluent-kafka"]
    tested = sorted(map(Version, gate.TESTED))
    first, last = tested[0], tested[-1]
    assert all(v in requirement.specifier for v in tested) and Version(gate.NEWEST) == last
    beyond = [Version(f"{last.major}.{last.minor}.{last.micro + 1}"), Version(f"{last.major}.{last.minor + 1}.0"),
              Version(f"{first.major}.{first.minor}.{first.micro - 1}")]
    assert not list(requirement.specifier.filter(beyond))


def test_the_installed_version_is_a_tested_one() -> None:
    """pyproject.toml allows only tested versions, so a fresh install runs natively."""
    gate.unavailable.cache_clear()
    assert gate.unavailable() is None and gate.enabled(True) and not gate.enabled(False)


@pytest.mark.integration
def test_an_untested_version_reads_and_emits_on_the_plain_path(untested_client, bootstrap_servers, new_topic) -> None:
    topic, sink = new_topic(), new_topic()
    sent = produce(bootstrap_servers, topic, [Sent(0, b"k%d" % i, b"v%d" % i, 1_000 + i, [("h", b"%d" % i)])
                                              for i in range(30)])
    options = KafkaSourceOptions.parse({"kafka.bootstrap.servers": bootstrap_servers, "subscribe": topic})
    read = [row for batch in kafka_source.read_partition(options, topic, 0, 0, 30) for row in batch.to_pylist()]
    assert [(r["offset"], r["key"], r["headers"]) for r in read] == \
        [(s.offset, s.key, [{"key": "h", "value": b"%d" % i}]) for i, s in enumerate(sent)]
    emitter = TaskEmitter(bootstrap_servers, f"kcompact-{sink}-0", origins=ORIGINS)
    emitter.emit([(SinkPartition(PartitionId(sink, 0), -1),
                   [batch_from_records([make_record(r["offset"], r["key"], r["value"], 1_000, []) for r in read])])])
    assert isinstance(emitter._runs[PartitionId(sink, 0)], PlainProduce)
    emitter.close()
    assert [r.key for r in read_committed(bootstrap_servers, sink, 1)] == [s.key for s in sent]


@pytest.mark.integration
def test_a_job_on_an_untested_version_runs_on_the_plain_path_saying_so_once(bootstrap_servers, new_topic,
                                                                           tmp_path: Path) -> None:
    topic = new_topic()
    produce(bootstrap_servers, topic, [Sent(0, b"k%d" % (i % 5), b"v%d" % i, 1_000 + i) for i in range(50)])
    fake = tmp_path / "fake"
    fake.mkdir()
    (fake / "sitecustomize.py").write_text(f"import confluent_kafka\nconfluent_kafka.version = lambda: {UNTESTED!r}\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(fake), *sys.path[1:]])}
    done = kcompact("--log-level", "DEBUG", "run", "--bootstrap-servers", bootstrap_servers, "--source-topic", topic, "--sink-topic",
                    f"{topic}.c", "--state-dir", str(tmp_path / "state"), "--once", "--drain", env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    said = lines(done.stderr)
    assert any("records fetched through the plain path" in line for line in said), "the source's tasks"
    assert any("records produced through the plain path" in line for line in said), "the compaction's tasks"
    assert not any("through the native path" in line for line in said), done.stderr[-3000:]
    warnings = [line for line in said if " WARNING " in line]
    assert len(warnings) == 1 and PLAIN in warnings[0] and f"confluent-kafka {UNTESTED} " in warnings[0], done.stderr
    latest = {r.key: r.value for r in read_committed(bootstrap_servers, f"{topic}.c", 1)}
    assert latest == {b"k%d" % k: b"v%d" % (45 + k) for k in range(5)}
