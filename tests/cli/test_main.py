"""The console command, `python -m streaming`, and the demo the README's first command runs."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from streaming.brokers.choice import BOOTSTRAP_ENV
from streaming.cli.main import build_parser


def test_module_and_console_script_are_the_same_program() -> None:
    via_module = subprocess.run([sys.executable, "-m", "streaming", "--help"], capture_output=True, text=True)
    via_script = subprocess.run([os.path.join(os.path.dirname(sys.executable), "kcompact"), "--help"],
                                capture_output=True, text=True)
    assert via_module.returncode == 0 and via_script.returncode == 0
    assert via_module.stdout == via_script.stdout
    assert "broker" in via_module.stdout and "demo" in via_module.stdout


def test_unknown_subcommand_is_rejected_by_name() -> None:
    with pytest.raises(SystemExit) as exc:
        build_parser().parse_args(["no-such-command"])
    assert exc.value.code == 2


@pytest.mark.integration
def test_demo_compacts_the_change_stream_and_shows_status(bootstrap_servers: str) -> None:
    env = {**os.environ, BOOTSTRAP_ENV: bootstrap_servers}
    out = subprocess.run([sys.executable, "-m", "streaming", "demo"], capture_output=True, text=True,
                         env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "broker: external cluster" in out.stderr
    sink = out.stdout.split("compacted, version-ordered):", 1)[1].split("kcompact status:", 1)[0]
    rows = [line.split() for line in sink.strip().splitlines()[1:]]
    assert [(r[1], r[2], r[3]) for r in rows] == [("user-1", "3", "2"), ("user-2", "2", "5"),
                                                  ("user-3", "2", "6"), ("user-4", "1", "7")]
    assert "null (tombstone)" in sink and "late v2" not in sink
    assert "max-compaction-delay-secs=" in out.stdout and "ok" in out.stdout


@pytest.mark.integration
def test_produce_changes_creates_the_topic_and_writes_versions(bootstrap_servers: str) -> None:
    from confluent_kafka import Consumer, TopicPartition

    from streaming.kafka.admin import unique_topic_name

    topic = unique_topic_name("changes")
    out = subprocess.run([sys.executable, "-m", "streaming", "produce-changes", "--bootstrap-servers",
                          bootstrap_servers, "--topic", topic, "--count", "200", "--partitions", "2"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    consumer = Consumer({"bootstrap.servers": bootstrap_servers, "group.id": topic})
    total = sum(consumer.get_watermark_offsets(TopicPartition(topic, p), cached=False)[1] for p in (0, 1))
    consumer.close()
    assert total == 200


@pytest.mark.integration
def test_produce_changes_creates_a_compacted_topic_over_the_keys_asked_and_refuses_a_replication_it_cannot_have(
        bootstrap_servers: str) -> None:
    from confluent_kafka.admin import AdminClient, ConfigResource

    from streaming.kafka.admin import unique_topic_name
    from streaming.kafka.clients import read_committed

    topic = unique_topic_name("changes")
    argv = [sys.executable, "-m", "streaming", "produce-changes", "--bootstrap-servers", bootstrap_servers,
            "--topic", topic, "--count", "300", "--partitions", "1", "--compact", "--keys", "5",
            "--replication-factor", "1"]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stderr == "", out.stderr
    admin = AdminClient({"bootstrap.servers": bootstrap_servers})  # kept while its future is pending
    configs = admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, topic)])
    assert next(iter(configs.values())).result(30)["cleanup.policy"].value == "compact"
    assert {r.key for r in read_committed(bootstrap_servers, topic, 1)} == {b"user-%d" % k for k in range(5)}
    too_many = subprocess.run([*argv[:7], unique_topic_name("changes"), "--replication-factor", "9"],
                              capture_output=True, text=True, timeout=120)
    err = too_many.stderr.strip().splitlines()
    assert too_many.returncode == 2 and len(err) == 1 and "replication factor" in err[0].lower(), too_many.stderr
    zero = subprocess.run([*argv[:7], "t", "--keys", "0"], capture_output=True, text=True, timeout=120)
    assert zero.returncode == 2 and zero.stderr.strip() == "kcompact: error: --keys must be at least 1, got 0"


@pytest.mark.parametrize("option,value", [("--config", "segment.ms"), ("--config", "no.such.key=1"),
                                          ("--kafka", "=x"), ("--sink-topic-config", "retention.ms")])
def test_a_bad_setting_is_one_line_naming_it_before_any_cluster_is_contacted(tmp_path, option: str,
                                                                            value: str) -> None:
    out = subprocess.run([sys.executable, "-m", "streaming", "run", "--bootstrap-servers", "127.0.0.1:1",
                          "--source-topic", "a", "--sink-topic", "b", "--state-dir", str(tmp_path), option, value],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode != 0 and len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert (value.split("=")[0] or value) in out.stderr
