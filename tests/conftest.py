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


# A skipped test proves nothing. In CI every skip fails the run unless the test is named here, with why its
# skip is acceptable; the list is printed at the end of every CI run.
SKIPS_ALLOWED_IN_CI: dict[str, str] = {}
_skipped: list[tuple[str, str]] = []


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.skipped:
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        _skipped.append((report.nodeid, reason))


def _unallowed_skips() -> list[tuple[str, str]]:
    return [(node, why) for node, why in _skipped if node not in SKIPS_ALLOWED_IN_CI] if os.environ.get("CI") else []


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if _unallowed_skips() and exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter) -> None:
    if not os.environ.get("CI"):
        return
    write = terminalreporter.write_line
    write(f"skips allowed in CI (tests/conftest.py SKIPS_ALLOWED_IN_CI): {len(SKIPS_ALLOWED_IN_CI) or 'none'}")
    for node, why in sorted(SKIPS_ALLOWED_IN_CI.items()):
        write(f"  {node}: {why}")
    for node, why in _unallowed_skips():
        write(f"FAILED (skipped in CI, not on the allow-list): {node}: {why}", red=True)
