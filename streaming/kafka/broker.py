"""Finding a Kafka broker for the demo, the tests and the CLI.

Three sources, tried in a fixed order so a user always knows which one is in play:

1. ``KAFKA_BOOTSTRAP_SERVERS`` names an existing cluster: use it, start nothing.
2. A Docker engine answers a ping: testcontainers starts the apache/kafka image in KRaft mode.
3. Otherwise a local single-node Apache Kafka (KRaft) is started with ``java`` from the jars the set-up
   fetched with Maven (``streaming.kafka.local``), on 127.0.0.1, and stopped by PID when done.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Callable, Iterator, Mapping

from streaming.kafka.local import KafkaJarsError, LocalKafka, LocalKafkaError, free_port
from streaming.kafka.local.jars import pinned_version
from streaming.errors import UserError

log = logging.getLogger(__name__)

BOOTSTRAP_ENV = "KAFKA_BOOTSTRAP_SERVERS"
KAFKA_IMAGE = f"apache/kafka:{pinned_version()}"


class BrokerKind(str, Enum):
    EXTERNAL = "external"
    TESTCONTAINERS = "testcontainers"
    LOCAL = "local"


class BrokerError(UserError, RuntimeError):
    """The broker could not be reached or started; the message says which and why."""


@dataclass
class Broker:
    """A reachable broker and how to give it back when done. ``server`` is the process of a local broker
    (which tests may kill and start again); ``sasl_bootstrap_servers`` a SASL_PLAINTEXT listener, if known."""

    bootstrap_servers: str
    kind: BrokerKind
    _stop: Callable[[], None] = field(default=lambda: None, repr=False)
    sasl_bootstrap_servers: str | None = None
    server: LocalKafka | None = field(default=None, repr=False)

    @property
    def pid(self) -> int | None:
        """The local broker's current process (a restarted one has a new pid); None for one we did not start."""
        return self.server.pid if self.server is not None else None

    def stop(self) -> None:
        self._stop()
        self._stop = lambda: None


def docker_engine_answers(timeout_s: float = 2.0) -> bool:
    """Ask the Docker engine itself (a ping), not just whether a client binary exists."""
    try:
        import docker  # noqa: PLC0415 (optional at run time: only needed on this path)
    except ImportError:
        return False
    try:
        client = docker.from_env(timeout=int(max(1, timeout_s)))
        try:
            return bool(client.ping())
        finally:
            client.close()
    except Exception as exc:  # docker raises a zoo of connection errors; any of them means "no engine"
        log.debug("docker engine did not answer: %s", exc)
        return False


def wait_for_metadata(bootstrap_servers: str, timeout_s: float = 60.0,
                      alive: Callable[[], bool] = lambda: True) -> None:
    """Block until the broker answers a metadata request, or raise naming the address."""
    from confluent_kafka.admin import AdminClient  # noqa: PLC0415 (keep import cost off the CLI's --help)

    admin = AdminClient({"bootstrap.servers": bootstrap_servers, "socket.timeout.ms": 2000})
    deadline = time.monotonic() + timeout_s
    last: Exception | None = None
    while time.monotonic() < deadline:
        if not alive():
            raise BrokerError(f"broker process for {bootstrap_servers} exited before it answered")
        try:
            md = admin.list_topics(timeout=2)
            if md.brokers:
                return
        except Exception as exc:  # KafkaException while the port is not yet open
            last = exc
        time.sleep(0.2)
    raise BrokerError(f"no metadata from {bootstrap_servers} within {timeout_s:.0f}s: {last}")


def start_local_broker(port: int | None = None, data_dir: str | Path | None = None,
                       sasl_users: Mapping[str, str] | None = None, startup_timeout_s: float = 120.0) -> Broker:
    """Start a local single-node Apache Kafka on 127.0.0.1 and wait until it answers metadata."""
    try:
        server = LocalKafka(data_dir, port, sasl_users)
        server.start(startup_timeout_s)
    except (KafkaJarsError, LocalKafkaError) as exc:
        raise BrokerError(str(exc)) from exc
    return _local(server)


def _local(server: LocalKafka) -> Broker:
    def stop() -> None:
        server.stop()
        log.info("stopped local Apache Kafka pid=%s at %s", server.pid, server.bootstrap_servers)

    try:
        wait_for_metadata(server.bootstrap_servers, alive=lambda: server.proc is not None and server.proc.poll() is None)
    except BaseException:
        server.stop()
        raise
    log.info("started local Apache Kafka %s pid=%d at %s (data dir %s)", server.jars.version, server.pid,
             server.bootstrap_servers, server.data_dir)
    return Broker(server.bootstrap_servers, BrokerKind.LOCAL, stop,
                  sasl_bootstrap_servers=server.sasl_bootstrap_servers, server=server)


def start_testcontainers_broker() -> Broker:
    """The apache/kafka image of the pinned version, KRaft, its listener bound to a free port on 127.0.0.1
    and advertised there (the image's own defaults advertise localhost:9092)."""
    from testcontainers.core.container import DockerContainer  # noqa: PLC0415 (Docker path only)
    from testcontainers.core.waiting_utils import wait_for_logs  # noqa: PLC0415

    port = free_port()
    container = DockerContainer(KAFKA_IMAGE).with_bind_ports(9092, port).with_envs(
        KAFKA_NODE_ID="1", KAFKA_PROCESS_ROLES="broker,controller",
        KAFKA_LISTENERS="PLAINTEXT://0.0.0.0:9092,CONTROLLER://localhost:9093",
        KAFKA_ADVERTISED_LISTENERS=f"PLAINTEXT://127.0.0.1:{port}",
        KAFKA_CONTROLLER_LISTENER_NAMES="CONTROLLER", KAFKA_CONTROLLER_QUORUM_VOTERS="1@localhost:9093",
        KAFKA_LISTENER_SECURITY_PROTOCOL_MAP="CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
        KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR="1", KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR="1",
        KAFKA_TRANSACTION_STATE_LOG_MIN_ISR="1", KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS="0",
        KAFKA_LOG_CLEANER_BACKOFF_MS="1000")
    container.start()
    try:
        wait_for_logs(container, "Kafka Server started", timeout=120)
        bootstrap = f"127.0.0.1:{port}"
        wait_for_metadata(bootstrap)
    except BaseException:
        container.stop()
        raise
    return Broker(bootstrap, BrokerKind.TESTCONTAINERS, container.stop)


def acquire_broker(sasl_users: Mapping[str, str] | None = None) -> Broker:
    """Pick a broker by the documented order and log the choice. A local broker also takes SASL/PLAIN
    logins of ``sasl_users`` on its SASL listener."""
    external = os.environ.get(BOOTSTRAP_ENV, "").strip()
    if external:
        log.info("broker: external cluster from %s=%s", BOOTSTRAP_ENV, external)
        wait_for_metadata(external, timeout_s=30)
        return Broker(external, BrokerKind.EXTERNAL)
    if docker_engine_answers():
        log.info("broker: Docker engine answered, starting testcontainers Kafka (KRaft, %s)", KAFKA_IMAGE)
        return start_testcontainers_broker()
    log.info("broker: no %s and no Docker engine answered; starting a local Apache Kafka %s (KRaft) on 127.0.0.1",
             BOOTSTRAP_ENV, pinned_version())
    return start_local_broker(sasl_users=sasl_users)


@contextlib.contextmanager
def running_broker() -> Iterator[Broker]:
    broker = acquire_broker()
    try:
        yield broker
    finally:
        broker.stop()
