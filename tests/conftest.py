"""Shared fixtures: one real broker per test session, and uniquely named topics on it."""

from __future__ import annotations

from typing import Callable, Iterator, Mapping

import os

import pytest
from hypothesis import settings

from streaming.kafka.broker import Broker, acquire_broker

# CI replays the same examples every run (a landing run is reproducible); local runs explore new ones.
settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")
from streaming.kafka.admin import create_topic, unique_topic_name
from tests.kafka_helpers import SASL_PASSWORD, SASL_USER
from tests.s3_server import CREDENTIALS, S3Server, start_s3_server

os.environ.update(CREDENTIALS)  # before any SparkSession starts, so its Python workers have them too


@pytest.fixture(scope="session")
def kafka_broker() -> Iterator[Broker]:
    broker = acquire_broker(sasl_users={SASL_USER: SASL_PASSWORD})
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture(scope="session")
def bootstrap_servers(kafka_broker: Broker) -> str:
    return kafka_broker.bootstrap_servers


@pytest.fixture(scope="session")
def sasl_bootstrap_servers(kafka_broker: Broker) -> str:
    """The broker's SASL_PLAINTEXT listener: known for the local broker; an external cluster or a container
    has none that the tests know of."""
    if kafka_broker.sasl_bootstrap_servers is None:
        pytest.skip(f"the {kafka_broker.kind.value} broker has no SASL listener known to the tests")
    return kafka_broker.sasl_bootstrap_servers


TopicFactory = Callable[..., str]


@pytest.fixture
def new_topic(bootstrap_servers: str) -> TopicFactory:
    """Create a fresh topic; retention is off by default because tests use old explicit timestamps."""

    def make(partitions: int = 1, config: Mapping[str, str] | None = None, prefix: str = "test") -> str:
        return create_topic(bootstrap_servers, unique_topic_name(prefix), partitions,
                            {"retention.ms": "-1", **(config or {})})

    return make


@pytest.fixture(scope="session")
def s3_server() -> Iterator[S3Server]:
    """One S3-compatible server (moto) on 127.0.0.1 per test session."""
    server = start_s3_server()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def spark():
    """One local[2] SparkSession for the whole run (starting one costs seconds)."""
    from streaming.spark.session import build_session

    session = build_session("kcompact-tests", driver_memory="1g")
    try:
        yield session
    finally:
        session.stop()
