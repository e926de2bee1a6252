"""Shared fixtures: one Docker engine, one real broker and one SparkSession per test session, and uniquely
named topics on the broker.

The broker is chosen as the product chooses it (streaming.brokers.choice): KAFKA_BOOTSTRAP_SERVERS if set,
else the project's Kafka image in a container when a Docker engine answers (the session starts one as root
on Debian, building the image first if it must), else a local Apache Kafka from Maven's jars.
"""

from __future__ import annotations

import os
from typing import Callable, Iterator, Mapping

import pytest
from hypothesis import settings

from streaming.brokers.broker import Broker, BrokerKind
from streaming.brokers.choice import BOOTSTRAP_ENV, acquire_broker
from streaming.kafka.admin import create_topic, unique_topic_name
from tests.crashing_broker import CrashingBroker
from tests.docker_engine import EngineSession, remove_containers, start_engine
from tests.kafka_helpers import SASL_PASSWORD, SASL_USER
from tests.minio import CREDENTIALS, S3Server
from tests.processes import brokers_compile_lightly
from tests.toxiproxy import TOXIPROXY, Toxiproxy
from tests.workers import assert_grouped, built_ones_last, group_by_side, without_group

# CI replays the same examples every run (a landing run is reproducible); local runs explore new ones.
settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")

os.environ.update(CREDENTIALS)  # before any SparkSession starts, so its Python workers have them too
brokers_compile_lightly()

_session: dict = {"engine": None, "broker": None, "on_broker": 0}


@pytest.fixture(scope="session")
def docker_engine() -> Iterator[EngineSession]:
    """The session's Docker engine: this run's containers go at the end, and those of killed runs at the start;
    an engine the session started is stopped by its PID."""
    from streaming.brokers.engine import RUN_ID, connected

    engine = start_engine()
    _session["engine"] = engine
    if engine.available:
        with connected() as docker:
            remove_containers(docker)
    try:
        yield engine
    finally:
        if engine.available:
            with connected() as docker:
                remove_containers(docker, RUN_ID)
        engine.stop()


def _built(docker_engine: EngineSession, build) -> str:
    """An image of the project's, built here when missing or out of date (no registry needed)."""
    from streaming.brokers.engine import connected

    if not docker_engine.available:
        pytest.skip(f"no Docker engine: {docker_engine.how}")
    with connected(30) as docker:
        return build(docker)


@pytest.fixture(scope="session")
def kafka_image(docker_engine: EngineSession) -> str:
    """The project's Kafka image."""
    from scripts.build_images import build_kafka

    return _built(docker_engine, build_kafka)


@pytest.fixture(scope="session")
def kcompact_image(docker_engine: EngineSession) -> str:
    """The compactor's image of this checkout."""
    from scripts.build_images import build_kcompact

    return _built(docker_engine, build_kcompact)


@pytest.fixture(scope="session")
def kafka_broker(request: pytest.FixtureRequest) -> Iterator[Broker]:
    if not os.environ.get(BOOTSTRAP_ENV) and request.getfixturevalue("docker_engine").available:
        request.getfixturevalue("kafka_image")  # the broker choice finds the image built
    with acquire_broker(sasl_users={SASL_USER: SASL_PASSWORD}) as broker:
        _session["broker"] = broker
        yield broker


@pytest.fixture(scope="session")
def bootstrap_servers(kafka_broker: Broker) -> str:
    return kafka_broker.bootstrap_servers


SERVER_FIXTURES = frozenset({"kafka_broker", "bootstrap_servers", "cluster_broker", "cluster", "docker_engine",
                             "s3_server"})


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The fast lane (scripts/test.sh --fast: not integration, not slow) must start no broker and no S3
    server: a test that asks for one and carries neither mark is a collection error naming it. Each test goes to the worker
    holding the services it uses, after the tests that wait on no build (tests/workers.py)."""
    unmarked = [f"{item.nodeid} ({', '.join(sorted(SERVER_FIXTURES & set(item.fixturenames)))})"
                for item in items if SERVER_FIXTURES & set(getattr(item, "fixturenames", ()))
                and not (item.get_closest_marker("integration") or item.get_closest_marker("slow"))]
    if unmarked:
        raise pytest.UsageError("tests that use a broker or an S3 server must be marked integration (or slow): " + "; ".join(unmarked))
    group_by_side(config, items)
    built_ones_last(items)


def pytest_collection_finish(session: pytest.Session) -> None:
    assert_grouped(session)


def pytest_runtest_setup(item: pytest.Item) -> None:
    # the secured-cluster tests ask for the session's broker by parameter (secured="broker")
    on_broker = getattr(getattr(item, "callspec", None), "params", {}).get("secured") == "broker"
    if "kafka_broker" in getattr(item, "fixturenames", ()) or on_broker:
        _session["on_broker"] += 1


TopicFactory = Callable[..., str]


@pytest.fixture
def new_topic(bootstrap_servers: str) -> TopicFactory:
    """Create a fresh topic; retention is off by default because tests use old explicit timestamps."""

    def make(partitions: int = 1, config: Mapping[str, str] | None = None, prefix: str = "test") -> str:
        return create_topic(bootstrap_servers, unique_topic_name(prefix), partitions,
                            {"retention.ms": "-1", **(config or {})})

    return make


@pytest.fixture
def crashing_broker(tmp_path) -> Iterator[CrashingBroker]:
    """Always a local Apache Kafka: an external cluster or a container cannot be crashed from here."""
    broker = CrashingBroker(tmp_path / "broker")
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture(scope="session")
def toxiproxy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Toxiproxy]:
    """One Toxiproxy for the session: the three-node cluster's clients go through it (tests.e2e.conftest)."""
    server = Toxiproxy(TOXIPROXY.ensure(), tmp_path_factory.mktemp("toxiproxy") / "toxiproxy.log")
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    """One S3 server (MinIO) on 127.0.0.1 per test session; each test makes a bucket of its own."""
    server = S3Server(tmp_path_factory.mktemp("minio") / "data")
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def postgres(tmp_path_factory: pytest.TempPathFactory):
    """One PostgreSQL with logical decoding for the session (tests.cdc.postgres), stopped by its PID."""
    from tests.cdc.postgres import start_postgres

    server = start_postgres(tmp_path_factory.mktemp("postgres"))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def debezium_connect(bootstrap_servers: str, tmp_path_factory: pytest.TempPathFactory):
    """One Kafka Connect worker with Debezium's PostgreSQL connector for the session, on the session's broker."""
    from tests.cdc.connect import start_connect

    worker = start_connect(bootstrap_servers, tmp_path_factory.mktemp("connect"))
    try:
        yield worker
    finally:
        worker.stop()


@pytest.fixture(scope="session")
def spark():
    """One local[2] SparkSession for the worker's whole run (starting one costs seconds), which the jobs run in
    a test's own process share (tests/workers.py)."""
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
        _skipped.append((without_group(report.nodeid), reason))


def _unallowed_skips() -> list[tuple[str, str]]:
    return [(node, why) for node, why in _skipped if node not in SKIPS_ALLOWED_IN_CI] if os.environ.get("CI") else []


# What each xdist worker's session saw of its broker, relayed to the controller, which reports for the run
_workers: list[dict] = []


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error) -> None:
    _workers.append(getattr(node, "workeroutput", {}).get("kcompact", {}))


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if hasattr(session.config, "workeroutput"):  # an xdist worker: the controller reports and decides
        session.config.workeroutput["kcompact"] = {"broker_line": _broker_line(), "missed": _missed_container()}
        return
    if (_unallowed_skips() or _missed_anywhere()) and exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def _broker_line() -> str | None:
    broker, engine = _session["broker"], _session["engine"]
    if broker is None:
        return None
    return (f"{_session['on_broker']} tests ran on the session's {broker.kind.value} broker at "
            f"{broker.bootstrap_servers}" + (f"; Docker: {engine.how}" if engine is not None else ""))


def _missed_container() -> bool:
    """In CI, an engine that answers must carry the session's broker: a fallback would hide the container path."""
    broker, engine = _session["broker"], _session["engine"]
    return bool(os.environ.get("CI") and broker is not None and engine is not None and engine.available
                and broker.kind is BrokerKind.LOCAL)


def _missed_anywhere() -> bool:
    return _missed_container() or any(w.get("missed") for w in _workers)


def pytest_terminal_summary(terminalreporter) -> None:
    write = terminalreporter.write_line
    for line in [_broker_line(), *(w.get("broker_line") for w in _workers)]:
        if line:
            write(line)
    if _missed_anywhere():
        write("FAILED: a Docker engine answered, but the session's broker is not the container broker", red=True)
    if not os.environ.get("CI"):
        return
    write(f"skips allowed in CI (tests/conftest.py SKIPS_ALLOWED_IN_CI): {len(SKIPS_ALLOWED_IN_CI) or 'none'}")
    for node, why in sorted(SKIPS_ALLOWED_IN_CI.items()):
        write(f"  {node}: {why}")
    for node, why in _unallowed_skips():
        write(f"FAILED (skipped in CI, not on the allow-list): {node}: {why}", red=True)
