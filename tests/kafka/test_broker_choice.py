"""The broker helper's order: external cluster, then Docker, then a local Apache Kafka (KRaft) from Maven's jars."""

from __future__ import annotations

import os
import socket

import pytest
from confluent_kafka.admin import AdminClient

from streaming.kafka.broker import BOOTSTRAP_ENV, BrokerKind, acquire_broker, docker_engine_answers, free_port

pytestmark = pytest.mark.integration


def _closed_port() -> int:
    port = free_port()
    with socket.socket() as s:
        assert s.connect_ex(("127.0.0.1", port)) != 0
    return port


def test_docker_check_asks_the_engine(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-docker.sock")
    assert docker_engine_answers() is False
    monkeypatch.setenv("DOCKER_HOST", f"tcp://127.0.0.1:{_closed_port()}")
    assert docker_engine_answers() is False


def test_falls_back_past_docker_to_local_broker(monkeypatch: pytest.MonkeyPatch,
                                                caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.delenv(BOOTSTRAP_ENV, raising=False)
    monkeypatch.setenv("DOCKER_HOST", f"tcp://127.0.0.1:{_closed_port()}")
    caplog.set_level("INFO", logger="streaming.kafka.broker")
    broker = acquire_broker()
    try:
        assert broker.kind is BrokerKind.LOCAL
        assert broker.bootstrap_servers.startswith("127.0.0.1:")
        assert "no Docker engine answered" in caplog.text
        md = AdminClient({"bootstrap.servers": broker.bootstrap_servers}).list_topics(timeout=10)
        assert md.brokers, "the local broker must answer metadata"
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
