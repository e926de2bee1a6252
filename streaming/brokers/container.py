"""Apache Kafka in a container of the project's own image (streaming.brokers.images), started with
testcontainers: one node, configured as the local broker is (streaming.brokers.properties) and labelled as
this run's. It shares the host's network and listens on free ports of 127.0.0.1, so every address it
advertises is right for the clients on the host, for the compactor's image run beside it, and for the broker
itself (a transaction coordinator writes its markers through the advertised listener: behind a port mapping,
the host's port is not the container's, and every commit would hang)."""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from typing import Mapping

from streaming.brokers.broker import Broker, BrokerError, BrokerKind, secure_access
from streaming.brokers.engine import run_labels
from streaming.brokers.local.server import KAFKA_OPTS, LOCAL_HOST, STARTED, free_port
from streaming.brokers.properties import Listeners, as_environment, broker_properties
from streaming.security.certificates import make_certificates
from streaming.kafka.admin import wait_for_metadata

log = logging.getLogger(__name__)

DATA_DIR = "/var/lib/kafka/data"


def start_kafka_container(image: str, sasl_users: Mapping[str, str] | None = None,
                          startup_timeout_s: float = 120.0) -> Broker:
    from testcontainers.core.container import DockerContainer  # noqa: PLC0415 (the Docker path only)
    from testcontainers.core.wait_strategies import LogMessageWaitStrategy  # noqa: PLC0415

    listeners = Listeners(*(f"{LOCAL_HOST}:{free_port()}" for _ in range(5)))
    # the certificates are made here and seen at the same path inside (a bind mount, read-only)
    tls_dir = tempfile.mkdtemp(prefix="kcompact-tls-")
    certificates = make_certificates(tls_dir)
    settings = broker_properties(1, listeners, f"1@{listeners.controller}", DATA_DIR, sasl_users or {}, certificates)
    jvm = {KAFKA_OPTS: os.environ[KAFKA_OPTS]} if os.environ.get(KAFKA_OPTS) else {}  # the image's entrypoint reads it
    container = (DockerContainer(image).with_envs(**as_environment(settings), **jvm)
                 .with_volume_mapping(tls_dir, tls_dir, "ro")
                 .with_kwargs(labels=run_labels(), network_mode="host")
                 .waiting_for(LogMessageWaitStrategy(STARTED).with_startup_timeout(int(startup_timeout_s))))

    def stop() -> None:
        container.stop()
        shutil.rmtree(tls_dir, ignore_errors=True)

    try:
        container.start()
        wait_for_metadata(listeners.broker)
        secure = secure_access(listeners.broker, listeners.ssl, listeners.sasl_ssl, certificates)
    except Exception as exc:  # the engine's, testcontainers' and the broker's failures alike: one line says which
        stop()
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
        raise BrokerError(f"the Kafka container ({image}) did not start: {first}") from exc
    log.info("started Apache Kafka in a container of %s at %s", image, listeners.broker)
    return Broker(listeners.broker, BrokerKind.CONTAINER, stop, sasl_bootstrap_servers=listeners.sasl, secure=secure)
