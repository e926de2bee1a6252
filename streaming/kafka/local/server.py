"""A single-node Apache Kafka (KRaft, combined broker and controller) run with ``java`` from the cached jars.

It listens on 127.0.0.1 only, on free ports, with replication 1 for the internal topics, a small heap and
the log cleaner on (with a short back-off, so tests can use Kafka's own cleaner as an oracle). The storage
is formatted with a generated cluster id on first start; a restart on the same data directory keeps it and
the ports. The JVM runs in a process group of its own with a parent-death signal, so it is stopped by PID
on normal exit, on Ctrl-C, on a test failure and even when the Python process that started it is killed.
``kill()`` stops it with SIGKILL, as a crashed broker would stop, for the fault tests.
"""

from __future__ import annotations

import base64
import contextlib
import ctypes
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from streaming.kafka.local.jars import KafkaJars, ensure_kafka_jars

LOCAL_HOST = "127.0.0.1"
HEAP = "-Xmx768m"
STARTED = "Kafka Server started"
CLEANER_LOG = "log-cleaner.log"
SERVER_LOG = "server.log"
_PORTS_FILE = "kcompact-ports.json"

# Kafka's cleaner logs its own pass statistics to log-cleaner.log, as in Kafka's distribution.
_LOG4J2 = """Configuration:
  Appenders:
    File:
      - name: server
        fileName: "{dir}/server.log"
        PatternLayout: {{pattern: "[%d] %p %m (%c)%n"}}
      - name: cleaner
        fileName: "{dir}/log-cleaner.log"
        PatternLayout: {{pattern: "[%d] %p %m (%c)%n"}}
  Loggers:
    Root:
      level: INFO
      AppenderRef: [{{ref: server}}]
    Logger:
      - name: org.apache.kafka.storage.internals.log.LogCleaner
        level: INFO
        additivity: false
        AppenderRef: [{{ref: cleaner}}]
      - name: org.apache.kafka.storage.internals.log.LogCleaner$CleanerThread
        level: INFO
        additivity: false
        AppenderRef: [{{ref: cleaner}}]
      - name: org.apache.kafka.storage.internals.log.Cleaner
        level: INFO
        additivity: false
        AppenderRef: [{{ref: cleaner}}]
      - name: org.apache.kafka.storage.internals.log.LogCleanerManager
        level: INFO
        additivity: false
        AppenderRef: [{{ref: cleaner}}]
"""


class LocalKafkaError(RuntimeError):
    """The local broker could not start; the message says why and where its log is."""


@dataclass(frozen=True)
class Ports:
    broker: int
    controller: int
    sasl: int


def free_port(host: str = LOCAL_HOST) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def cluster_id() -> str:
    """The form Kafka's own ``random-uuid`` prints: 16 random bytes, URL-safe base64, no padding, and, as
    Kafka's Uuid.randomUuid does, never starting with '-' (a command line would take it for an option)."""
    while (cid := base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")).startswith("-"):
        pass
    return cid


def _die_with_parent() -> None:
    """Runs in the child before exec: new process group, and SIGTERM when our process dies."""
    os.setsid()
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        pr_set_pdeathsig = 1
        libc.prctl(pr_set_pdeathsig, signal.SIGTERM)


def _signal_group(proc: subprocess.Popen, sig: int, grace_s: float) -> None:
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, sig)
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=grace_s)


class LocalKafka:
    """One broker process over one data directory; started, killed and started again at will."""

    def __init__(self, data_dir: str | Path | None = None, port: int | None = None,
                 sasl_users: Mapping[str, str] | None = None, jars: KafkaJars | None = None) -> None:
        self.owns_dir = data_dir is None
        self.data_dir = Path(tempfile.mkdtemp(prefix="kcompact-kafka-")) if data_dir is None else Path(data_dir)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.sasl_users = dict(sasl_users or {})
        self.jars = jars or ensure_kafka_jars()
        self.ports = self._ports(port)
        self.proc: subprocess.Popen | None = None

    @property
    def bootstrap_servers(self) -> str:
        return f"{LOCAL_HOST}:{self.ports.broker}"

    @property
    def sasl_bootstrap_servers(self) -> str:
        return f"{LOCAL_HOST}:{self.ports.sasl}"

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    @property
    def cleaner_log(self) -> Path:
        return self.data_dir / CLEANER_LOG

    def _ports(self, port: int | None) -> Ports:
        """The ports of an earlier start on this data directory (a restart keeps its address), else free ones."""
        saved = self.data_dir / _PORTS_FILE
        if saved.exists():
            ports = Ports(**json.loads(saved.read_text()))
            if port is None or port == ports.broker:
                return ports
        ports = Ports(port or free_port(), free_port(), free_port())
        saved.write_text(json.dumps(ports.__dict__))
        return ports

    def _properties(self) -> str:
        p = self.ports
        lines = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": f"1@{LOCAL_HOST}:{p.controller}",
            "listeners": f"PLAINTEXT://{LOCAL_HOST}:{p.broker},CONTROLLER://{LOCAL_HOST}:{p.controller},"
                         f"SASL_PLAINTEXT://{LOCAL_HOST}:{p.sasl}",
            "advertised.listeners": f"PLAINTEXT://{LOCAL_HOST}:{p.broker},SASL_PLAINTEXT://{LOCAL_HOST}:{p.sasl}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
            # PLAIN logins for the configured users; SCRAM is offered too, with no credentials, so a client
            # using it is refused as by a cluster that does not know it.
            "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config":
                "org.apache.kafka.common.security.plain.PlainLoginModule required "
                + "".join(f'user_{u}="{pw}" ' for u, pw in self.sasl_users.items()) + ";",
            "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config":
                "org.apache.kafka.common.security.scram.ScramLoginModule required ;",
            "log.dirs": str(self.data_dir / "logs"),
            "num.partitions": "1",
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": "4",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "transaction.state.log.num.partitions": "4",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
            "log.cleaner.enable": "true",
            "log.cleaner.backoff.ms": "1000",
            "auto.create.topics.enable": "false",
        }
        return "".join(f"{k}={v}\n" for k, v in lines.items())

    def _java(self, main: str, *args: str, heap: str = HEAP) -> list[str]:
        java = shutil.which("java")
        if java is None:
            raise LocalKafkaError("java is missing: the local Apache Kafka broker needs Java 17 or newer "
                                  "(scripts/bootstrap.sh installs it)")
        return [java, heap, "-Xms128m", "-XX:+UseG1GC", "-Djava.awt.headless=true",
                f"-Dlog4j2.configurationFile={self.data_dir / 'log4j2.yaml'}",
                "-cp", self.jars.classpath, main, *args]

    def _format_once(self, properties: Path) -> None:
        if (self.data_dir / "logs" / "meta.properties").exists():
            return
        done = subprocess.run(self._java("kafka.tools.StorageTool", "format", "-t", cluster_id(),
                                         "-c", str(properties), heap="-Xmx256m"),
                              capture_output=True, text=True, stdin=subprocess.DEVNULL)
        if done.returncode != 0:
            raise LocalKafkaError(f"formatting the local broker's storage in {self.data_dir} failed: "
                                  f"{(done.stdout + done.stderr).strip()[-500:]}")

    def start(self, timeout_s: float = 120.0) -> None:
        """Start the process and return once its log says the server has started (the broker helper then
        waits for it to answer metadata)."""
        properties = self.data_dir / "server.properties"
        properties.write_text(self._properties())
        (self.data_dir / "log4j2.yaml").write_text(_LOG4J2.format(dir=self.data_dir))
        self._format_once(properties)
        server_log = self.data_dir / SERVER_LOG
        seen = server_log.stat().st_size if server_log.exists() else 0
        with open(self.data_dir / "stdout.log", "ab") as out:
            self.proc = subprocess.Popen(self._java("kafka.Kafka", str(properties)), stdout=out,
                                         stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         preexec_fn=_die_with_parent)  # noqa: PLW1509 (setsid + pdeathsig)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise LocalKafkaError(f"the local Apache Kafka broker exited with {self.proc.returncode} while "
                                      f"starting; see {server_log} and {self.data_dir / 'stdout.log'}")
            if server_log.exists():
                with open(server_log, "rb") as f:
                    f.seek(seen)
                    if STARTED.encode() in f.read():
                        return
            time.sleep(0.2)
        self.kill()
        raise LocalKafkaError(f"the local Apache Kafka broker did not start within {timeout_s:.0f}s; see {server_log}")

    def kill(self) -> None:
        """SIGKILL, as a crash: nothing flushed, no controlled shutdown."""
        if self.proc is not None:
            _signal_group(self.proc, signal.SIGKILL, 30.0)

    def stop(self) -> None:
        """A controlled shutdown (SIGTERM, SIGKILL after a grace period), and the data gone if it was ours."""
        if self.proc is not None:
            _signal_group(self.proc, signal.SIGTERM, 20.0)
        if self.owns_dir:
            shutil.rmtree(self.data_dir, ignore_errors=True)
