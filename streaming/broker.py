"""Finding a Kafka-protocol broker for the demo, the tests and the CLI.

Three sources, tried in a fixed order so a user always knows which one is in play:

1. ``KAFKA_BOOTSTRAP_SERVERS`` names an existing cluster: use it, start nothing.
2. A Docker engine answers a ping: start testcontainers' Apache Kafka container in KRaft mode.
3. Otherwise start the ``noida-db`` binary on 127.0.0.1 with a throw-away data directory.

The local broker is started as the real binary (not the ``noida-db`` console wrapper, whose PID is not
the broker's) in a process group of its own, with a parent-death signal, so that it is stopped by PID on
normal exit, on Ctrl-C, on a test failure and even when the Python process is killed.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Callable, Iterator

log = logging.getLogger(__name__)

BOOTSTRAP_ENV = "KAFKA_BOOTSTRAP_SERVERS"
LOCAL_HOST = "127.0.0.1"
KAFKA_IMAGE = "confluentinc/cp-kafka:7.6.0"


class BrokerKind(str, Enum):
    EXTERNAL = "external"
    TESTCONTAINERS = "testcontainers"
    LOCAL = "local"


class BrokerError(RuntimeError):
    """The broker could not be reached or started; the message says which and why."""


@dataclass
class Broker:
    """A reachable broker and how to give it back when done."""

    bootstrap_servers: str
    kind: BrokerKind
    pid: int | None = None
    _stop: Callable[[], None] = field(default=lambda: None, repr=False)

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


def free_port(host: str = LOCAL_HOST) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


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


def noida_binary() -> Path:
    """The real broker binary shipped inside the noida-db wheel."""
    import noida_db  # noqa: PLC0415

    path = Path(noida_db.__file__).parent / "noida-db"
    if not path.exists():
        raise BrokerError(f"noida-db binary not found at {path}; reinstall the 'noida-db' package")
    return path


def _die_with_parent() -> None:
    """Runs in the child before exec: new process group, and SIGTERM when our process dies."""
    os.setsid()
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        pr_set_pdeathsig = 1
        libc.prctl(pr_set_pdeathsig, signal.SIGTERM)


def _terminate_group(proc: subprocess.Popen, grace_s: float = 10.0) -> None:
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=grace_s)


def start_local_broker(port: int | None = None, data_dir: str | Path | None = None,
                       startup_timeout_s: float = 60.0) -> Broker:
    """Start noida-db's Kafka service on 127.0.0.1 and wait until it answers metadata."""
    port = port or free_port()
    owns_dir = data_dir is None
    data_path = Path(tempfile.mkdtemp(prefix="kcompact-broker-")) if owns_dir else Path(data_dir)
    data_path.mkdir(parents=True, exist_ok=True)
    log_file = open(data_path / "broker.log", "ab")  # noqa: SIM115 (closed by stop())
    cmd = [str(noida_binary()), "start", "--data-dir", str(data_path), "--host", LOCAL_HOST,
           "--only", "kafka", "--kafka-port", str(port)]
    proc = subprocess.Popen(cmd, stdout=log_file, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            preexec_fn=_die_with_parent)  # noqa: PLW1509 (setsid + pdeathsig only)
    bootstrap = f"{LOCAL_HOST}:{port}"

    def stop() -> None:
        _terminate_group(proc)
        log_file.close()
        if owns_dir:
            shutil.rmtree(data_path, ignore_errors=True)
        log.info("stopped local noida-db broker pid=%d at %s", proc.pid, bootstrap)

    try:
        wait_for_metadata(bootstrap, startup_timeout_s, alive=lambda: proc.poll() is None)
    except BaseException:
        stop()
        raise
    log.info("started local noida-db broker pid=%d at %s (data dir %s)", proc.pid, bootstrap, data_path)
    return Broker(bootstrap, BrokerKind.LOCAL, proc.pid, stop)


def start_testcontainers_broker() -> Broker:
    from testcontainers.community.kafka import KafkaContainer  # noqa: PLC0415 (Docker path only)

    container = KafkaContainer(KAFKA_IMAGE).with_kraft()
    container.start()
    bootstrap = container.get_bootstrap_server()
    wait_for_metadata(bootstrap)
    return Broker(bootstrap, BrokerKind.TESTCONTAINERS, None, container.stop)


def acquire_broker() -> Broker:
    """Pick a broker by the documented order and log the choice."""
    external = os.environ.get(BOOTSTRAP_ENV, "").strip()
    if external:
        log.info("broker: external cluster from %s=%s", BOOTSTRAP_ENV, external)
        wait_for_metadata(external, timeout_s=30)
        return Broker(external, BrokerKind.EXTERNAL)
    if docker_engine_answers():
        log.info("broker: Docker engine answered, starting testcontainers Kafka (KRaft, %s)", KAFKA_IMAGE)
        return start_testcontainers_broker()
    log.info("broker: no %s and no Docker engine answered; starting local noida-db on %s",
             BOOTSTRAP_ENV, LOCAL_HOST)
    return start_local_broker()


@contextlib.contextmanager
def running_broker() -> Iterator[Broker]:
    broker = acquire_broker()
    try:
        yield broker
    finally:
        broker.stop()
