"""Finding a Kafka broker for the demo, the tests and `kcompact broker`.

Three sources, tried in a fixed order so a user always knows which one is in play:

1. ``KAFKA_BOOTSTRAP_SERVERS`` names an existing cluster: use it, start nothing.
2. A Docker engine answers a ping: the project's Kafka image in a container (streaming.brokers.container).
3. Otherwise a local Apache Kafka (KRaft) is started with ``java`` from the jars the set-up fetched with
   Maven (streaming.brokers.local), on 127.0.0.1, and stopped by PID when done.

The choice never dies on an engine that cannot deliver: a missing client library, an image that was never
built (no registry answers here, so images are built, never pulled) or a container that does not start is
said in one line, and the local broker is used instead.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Mapping

from streaming.brokers.broker import Broker, BrokerError, BrokerKind, secure_access
from streaming.brokers.engine import DockerLibraryMissing, EngineMissing, client
from streaming.brokers.local import KafkaJarsError, LocalKafka, LocalKafkaError, Proxied
from streaming.brokers.local.cluster import LocalCluster
from streaming.brokers.local.jars import pinned_version
from streaming.kafka.admin import ClusterUnreachable, wait_for_metadata

log = logging.getLogger(__name__)

BOOTSTRAP_ENV = "KAFKA_BOOTSTRAP_SERVERS"
DOCKER_SOCKET = "/var/run/docker.sock"


def start_local_broker(port: int | None = None, data_dir: str | Path | None = None,
                       sasl_users: Mapping[str, str] | None = None, startup_timeout_s: float = 120.0,
                       proxied: Proxied | None = None) -> Broker:
    """Start a local single-node Apache Kafka on 127.0.0.1 and wait until it answers metadata;
    ``proxied``: a proxy in front of its PLAINTEXT listener, which clients are then sent to (LocalKafka)."""
    try:
        server = LocalKafka(data_dir, port, sasl_users, proxied=proxied)
        server.start(startup_timeout_s)
    except (KafkaJarsError, LocalKafkaError) as exc:
        raise BrokerError(str(exc)) from exc

    def stop() -> None:
        server.stop()
        log.info("stopped local Apache Kafka pid=%s at %s", server.pid, server.bootstrap_servers)

    try:
        wait_for_metadata(server.bootstrap_servers, alive=lambda: server.proc is not None and server.proc.poll() is None)
        secure = secure_access(server.bootstrap_servers, server.ssl_bootstrap_servers,
                               server.sasl_ssl_bootstrap_servers, server.certificates)
    except BaseException:
        server.stop()
        raise
    log.info("started local Apache Kafka %s pid=%d at %s (data dir %s)", server.jars.version, server.pid,
             server.bootstrap_servers, server.data_dir)
    return Broker(server.bootstrap_servers, BrokerKind.LOCAL, stop,
                  sasl_bootstrap_servers=server.sasl_bootstrap_servers, server=server, secure=secure)


def start_local_cluster(data_dir: str | Path | None = None, sasl_users: Mapping[str, str] | None = None,
                        startup_timeout_s: float = 180.0, proxied: list[Proxied] | None = None) -> Broker:
    """Start a local three-node Apache Kafka cluster on 127.0.0.1 and wait until it answers metadata with
    every node; ``proxied``: a proxy in front of each node's PLAINTEXT listener (LocalCluster)."""
    try:
        cluster = LocalCluster(data_dir, sasl_users, proxied=proxied)
        cluster.start(startup_timeout_s)
    except (KafkaJarsError, LocalKafkaError) as exc:
        raise BrokerError(str(exc)) from exc
    try:
        wait_for_metadata(cluster.bootstrap_servers, brokers=len(cluster.nodes))
        secure = secure_access(cluster.bootstrap_servers, cluster.ssl_bootstrap_servers,
                               cluster.sasl_ssl_bootstrap_servers, cluster.certificates)
    except BaseException:
        cluster.stop()
        raise
    log.info("started a local Apache Kafka cluster of %d nodes at %s (data dir %s)", len(cluster.nodes),
             cluster.bootstrap_servers, cluster.data_dir)
    return Broker(cluster.bootstrap_servers, BrokerKind.LOCAL, cluster.stop,
                  sasl_bootstrap_servers=cluster.sasl_bootstrap_servers, cluster=cluster, secure=secure)


def container_broker(sasl_users: Mapping[str, str] | None = None) -> Broker | None:
    """The project's Kafka image in a container, or None (and one line saying why) when the engine cannot
    deliver it. None, quietly, when there is no engine at all."""
    from streaming.brokers import images  # noqa: PLC0415 (the Docker path only)

    try:
        engine = client(2)
    except DockerLibraryMissing as exc:
        if os.environ.get("DOCKER_HOST") or os.path.exists(DOCKER_SOCKET):
            log.warning("a Docker engine may be there, but %s; using a local Apache Kafka", exc)
        return None
    except EngineMissing as exc:
        log.debug("%s", exc)
        return None
    image = images.kafka_image()
    try:
        built = images.content_of(engine, image) is not None
    finally:
        engine.close()
    if not built:
        log.warning("the Docker engine answers, but the Kafka image %s is not built (bash scripts/build_images.sh "
                    "builds it, no registry needed); using a local Apache Kafka", image)
        return None
    from streaming.brokers.container import start_kafka_container  # noqa: PLC0415

    try:
        return start_kafka_container(image, sasl_users)
    except BrokerError as exc:
        log.warning("%s; using a local Apache Kafka", exc)
        return None


def acquire_broker(sasl_users: Mapping[str, str] | None = None) -> Broker:
    """Pick a broker by the documented order and log the choice. A broker the project starts also takes
    SASL/PLAIN logins of ``sasl_users`` on its SASL listener."""
    external = os.environ.get(BOOTSTRAP_ENV, "").strip()
    if external:
        log.info("broker: external cluster from %s=%s", BOOTSTRAP_ENV, external)
        try:
            wait_for_metadata(external, timeout_s=30)
        except ClusterUnreachable as exc:
            raise BrokerError(f"{BOOTSTRAP_ENV}={external}: {exc}") from exc
        return Broker(external, BrokerKind.EXTERNAL)
    broker = container_broker(sasl_users)
    if broker is not None:
        return broker
    log.info("broker: no %s and no Kafka container; starting a local Apache Kafka %s (KRaft) on 127.0.0.1",
             BOOTSTRAP_ENV, pinned_version())
    return start_local_broker(sasl_users=sasl_users)
