"""The project's images, built without a registry and run for real: the compactor's image compacts a topic
once against Kafka, and the compose stack (Kafka, the demo producer, the compactor, all from the project's
images) compacts the demo stream, serves its metrics and goes away with its volumes."""

from __future__ import annotations

import os
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException

from streaming.brokers.engine import RUN_ID, connected, run_labels
from scripts.build_images import build_kafka
from streaming.brokers.images import CONTENT_LABEL, content_of
from tests.docker_engine import COMPOSE_PROJECT_LABEL, remove_containers
from streaming.brokers.local import free_port
from streaming.cli.demo import VERSION_HEADER
from streaming.kafka.admin import unique_topic_name
from streaming.kafka.failures import is_transient
from tests.e2e.helpers import NO_SINK_COMPACTION, read_topic, sent_view, sink_view, wait_for, winners
from tests.kafka_helpers import Sent, produce

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "docker" / "compose.yaml"
HOUR = 3_600_000


def test_a_build_of_an_image_that_is_up_to_date_does_nothing(kafka_image: str) -> None:
    with connected() as docker:
        before = docker.images.get(kafka_image)
        assert build_kafka(docker) == kafka_image
        assert docker.images.get(kafka_image).id == before.id and content_of(docker, kafka_image) == \
            before.labels[CONTENT_LABEL]


def test_the_kcompact_image_compacts_a_topic_once_and_keeps_its_iceberg_table(kcompact_image: str,
                                                                              bootstrap_servers: str, new_topic,
                                                                              tmp_path) -> None:
    src, sink = new_topic(partitions=2), unique_topic_name("sink")
    past = int(time.time() * 1000) - 2 * HOUR
    sent = produce(bootstrap_servers, src, [Sent(i % 2, b"k%d" % (i % 7), b"v%d" % i, past + i) for i in range(80)])
    state = tmp_path / "state"
    state.mkdir()
    # an uncompacted sink (NO_SINK_COMPACTION): the sink's every record against the winners, in order
    with connected() as docker:  # the host's network: the broker is published on 127.0.0.1
        container = docker.containers.run(
            kcompact_image, ["run", "--bootstrap-servers", bootstrap_servers, "--source-topic", src, "--sink-topic",
                             sink, "--state-dir", "/state", "--once", "--config", "max.compaction.lag.ms=60000",
                             "--snapshot-every", "0", "--iceberg-table", "shop.orders", "--iceberg-catalog",
                             "sqlite:////state/iceberg/catalog.db", *NO_SINK_COMPACTION],
            network_mode="host", volumes={str(state): {"bind": "/state", "mode": "rw"}}, labels=run_labels(),
            detach=True)
        try:
            result = container.wait(timeout=600)
            logs = container.logs().decode(errors="replace")
        finally:
            container.remove(force=True)
    assert result["StatusCode"] == 0, logs[-3000:]
    got = read_topic(bootstrap_servers, sink, 2)
    for p in range(2):
        assert sink_view(got[p]) == sent_view(winners([s for s in sent if s.partition == p]))
    assert (state / "kcompact.json").exists(), "the state dir is the host's"
    live = sum(len(winners([s for s in sent if s.partition == p])) for p in range(2))
    assert f"snapshot shop.orders: {live} rows written, 2 of 2 partitions changed" in logs, logs[-3000:]
    assert (state / "iceberg" / "catalog.db").exists()


def _compose(project: str, env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["docker-compose", "-f", str(COMPOSE), "-p", project, *args], env=env, capture_output=True,
                          text=True, timeout=600)


def _topic(bootstrap: str, topic: str) -> dict[int, list[dict]]:
    """Every record of every partition of the topic (tests.e2e.helpers.read_topic), or {} before it exists."""
    probe = Consumer({"bootstrap.servers": bootstrap, "group.id": f"probe-{time.time_ns()}"})
    try:
        md = probe.list_topics(topic, timeout=10).topics.get(topic)
        partitions = len(md.partitions) if md is not None and md.error is None else 0
    finally:
        probe.close()
    try:
        return read_topic(bootstrap, topic, partitions) if partitions else {}
    except KafkaException as exc:
        if not is_transient(exc):  # a topic the stack just created may not have its leaders yet
            raise
        return {}


def test_the_compose_stack_compacts_the_demo_stream_serves_metrics_and_goes_with_its_volumes(kcompact_image,
                                                                                           kafka_image) -> None:
    project = f"kcompact-{RUN_ID}"
    kafka_port, metrics_port, count = free_port(), free_port(), 400
    env = {**os.environ, "KCOMPACT_RUN_ID": RUN_ID, "KCOMPACT_RUN_PID": str(os.getpid()),
           "KAFKA_EXTERNAL_PORT": str(kafka_port), "KCOMPACT_METRICS_PORT": str(metrics_port),
           "DEMO_COUNT": str(count), "DEMO_INTERVAL": "0.005", "KCOMPACT_MAX_LAG_MS": "3000"}
    bootstrap = f"127.0.0.1:{kafka_port}"

    def produced() -> list[Sent]:
        source = [Sent(p, r["key"], r["value"], r["timestamp"], [h for h in r["headers"] if h[0] == VERSION_HEADER],
                       r["offset"]) for p, records in _topic(bootstrap, "demo-changes").items() for r in records]
        return source if len(source) == count else []

    def compacted() -> bool:
        latest = {(p, r["key"]): r["source_offset"] for p, records in _topic(bootstrap, "demo-changes-compacted").items()
                  for r in records}
        return latest == want

    up = _compose(project, env, "up", "-d")
    try:
        assert up.returncode == 0, up.stderr[-3000:]
        source = wait_for(produced, 180, "the demo producer wrote its changes")
        want = {(p, s.key): s.offset for p in {s.partition for s in source}
                for s in winners([s for s in source if s.partition == p], "header", VERSION_HEADER)}
        wait_for(compacted, 240, "the sink holds the compacted view of the demo stream", pause_s=3)
        metrics = urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10).read().decode()
        assert "kcompact_records_emitted_total" in metrics and "kcompact_cleaner_max_dirty_percent" in metrics
    finally:
        down = _compose(project, env, "down", "-v")
    assert down.returncode == 0, down.stderr[-3000:]
    with connected() as docker:
        label = f"{COMPOSE_PROJECT_LABEL}={project}"
        assert not docker.containers.list(all=True, filters={"label": label})
        assert not docker.volumes.list(filters={"label": label}) and not docker.networks.list(filters={"label": label})


def test_containers_of_a_run_whose_process_is_gone_are_removed_and_others_are_not(kafka_image) -> None:
    finished = subprocess.Popen(["true"])
    finished.wait()
    with connected() as docker:
        orphan = docker.containers.create(kafka_image, labels={**run_labels(), "io.kcompact.pid": str(finished.pid)})
        ours = docker.containers.create(kafka_image, labels=run_labels())
        foreign = docker.containers.create(kafka_image, labels={"io.kcompact.run": "a user's compose stack"})
        try:
            assert remove_containers(docker) == 1
            left = {c.id for c in docker.containers.list(all=True, filters={"label": "io.kcompact.run"})}
            assert orphan.id not in left and {ours.id, foreign.id} <= left
        finally:
            for c in (ours, foreign):
                c.remove(force=True)
