"""The broker choice: an external cluster, then the project's Kafka image in a container when a Docker engine
answers, then a local Apache Kafka (KRaft) from Maven's jars; an engine that cannot deliver says why in one
line and the local broker is used."""

from __future__ import annotations

import logging
import os
import socket

import pytest
from confluent_kafka.admin import AdminClient

from scripts.build_images import BASE_REPOSITORY
from streaming.brokers import choice, images
from streaming.brokers.broker import BrokerKind
from streaming.brokers.choice import BOOTSTRAP_ENV, acquire_broker
from streaming.brokers.engine import RUN_ID, RUN_LABEL, connected, engine_answers
from streaming.brokers.local import free_port
from tests.kafka_helpers import SASL_PASSWORD, SASL_USER

pytestmark = pytest.mark.integration


def _closed_port() -> int:
    port = free_port()
    with socket.socket() as s:
        assert s.connect_ex(("127.0.0.1", port)) != 0
    return port


def _answers(bootstrap: str) -> bool:
    return bool(AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10).brokers)


def test_docker_check_asks_the_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/kcompact-no-docker.sock")  # short: a socket path has 108 bytes
    assert engine_answers() is False
    monkeypatch.setenv("DOCKER_HOST", f"tcp://127.0.0.1:{_closed_port()}")
    assert engine_answers() is False


def test_without_an_engine_the_local_broker_is_started_and_stopped_by_pid(monkeypatch: pytest.MonkeyPatch,
                                                                          caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.delenv(BOOTSTRAP_ENV, raising=False)
    monkeypatch.setenv("DOCKER_HOST", f"tcp://127.0.0.1:{_closed_port()}")
    caplog.set_level("INFO", logger="streaming.brokers.choice")
    broker = acquire_broker()
    try:
        assert broker.kind is BrokerKind.LOCAL and broker.bootstrap_servers.startswith("127.0.0.1:")
        assert "no Kafka container; starting a local Apache Kafka" in caplog.text
        assert not [r for r in caplog.records if r.levelno >= logging.WARNING], "no engine at all is no news"
        assert _answers(broker.bootstrap_servers)
        pid = broker.pid
    finally:
        broker.stop()
    assert pid is not None
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_external_cluster_is_used_as_is(monkeypatch: pytest.MonkeyPatch, bootstrap_servers: str) -> None:
    monkeypatch.setenv(BOOTSTRAP_ENV, bootstrap_servers)
    broker = acquire_broker()
    assert broker.kind is BrokerKind.EXTERNAL
    assert broker.bootstrap_servers == bootstrap_servers
    assert broker.pid is None
    broker.stop()


def test_the_container_broker_runs_the_projects_image_with_a_sasl_listener_and_is_removed(kafka_image) -> None:
    broker = choice.container_broker(sasl_users={SASL_USER: SASL_PASSWORD})
    assert broker is not None and broker.kind is BrokerKind.CONTAINER
    with connected() as docker:
        try:
            ours = docker.containers.list(filters={"label": f"{RUN_LABEL}={RUN_ID}", "ancestor": kafka_image})
            assert ours, "the container carries this run's label"
            assert _answers(broker.bootstrap_servers)
            sasl = AdminClient({"bootstrap.servers": broker.sasl_bootstrap_servers, "security.protocol": "SASL_PLAINTEXT",
                                "sasl.mechanism": "PLAIN", "sasl.username": SASL_USER, "sasl.password": SASL_PASSWORD})
            assert sasl.list_topics(timeout=10).brokers, "the SASL listener takes the test user's login"
        finally:
            broker.stop()
        assert not docker.containers.list(all=True, filters={"id": ours[0].id}), "stopping removes the container"


@pytest.mark.parametrize("how", ["image never built", "container does not start"])
def test_an_engine_that_cannot_deliver_says_why_in_one_line_and_the_local_broker_is_used(
        kafka_image, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, how: str) -> None:
    monkeypatch.delenv(BOOTSTRAP_ENV, raising=False)
    with connected() as docker:
        base = next(t for i in docker.images.list(name=BASE_REPOSITORY) for t in i.tags)
    # an image that is not there, or one that is there but runs no broker (the bare base has no command)
    monkeypatch.setattr(images, "kafka_image", lambda: "kcompact/kafka:0.0.0-never-built" if how == "image never built"
                        else base)
    caplog.set_level("INFO", logger="streaming.brokers")
    broker = acquire_broker()
    try:
        assert broker.kind is BrokerKind.LOCAL and _answers(broker.bootstrap_servers)
    finally:
        broker.stop()
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1 and "\n" not in warnings[0], warnings
    assert warnings[0].endswith("using a local Apache Kafka")
    assert ("is not built (bash scripts/build_images.sh" in warnings[0]) == (how == "image never built")
    assert ("did not start" in warnings[0]) == (how == "container does not start")


def test_a_missing_docker_library_says_what_to_install_in_one_line(monkeypatch: pytest.MonkeyPatch,
                                                                   caplog: pytest.LogCaptureFixture) -> None:
    """A user who runs the compactor needs neither testcontainers nor docker; `kcompact demo` and `kcompact
    broker` on a host with an engine name the extra that gives them."""
    import builtins

    real_import = builtins.__import__

    def without_docker(name, *args, **kwargs):
        if name == "docker" or name.startswith("docker."):
            raise ImportError(f"No module named {name!r}")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", without_docker)
    monkeypatch.setenv("DOCKER_HOST", "unix:///var/run/docker.sock")
    caplog.set_level("INFO", logger="streaming.brokers")
    assert choice.container_broker() is None
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert warnings == ["a Docker engine may be there, but the Docker client library is not installed (pip install "
                        "'kcompact[docker]'); using a local Apache Kafka"]
