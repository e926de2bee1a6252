"""An Apache Kafka node (KRaft, combined broker and controller) run with ``java`` from the cached jars.

It listens on 127.0.0.1 only, on free ports, configured as every node the project runs is
(streaming.brokers.properties), with a capped heap. The storage is formatted with a generated cluster id on
first start; a restart on the same data directory keeps it and the ports. The JVM runs in a process group of its own with a parent-death signal, so it is stopped by PID
on normal exit, on Ctrl-C, on a test failure and even when the Python process that started it is killed.
``kill()`` stops it with SIGKILL, as a crashed broker would stop, for the fault tests.
"""

from __future__ import annotations

import base64
import contextlib
import ctypes
import fcntl
import json
import os
import random
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

from streaming.brokers.local.jars import KafkaJars, ensure_kafka_jars
from streaming.brokers.properties import (SINGLE_NODE, Listeners, Replication, as_properties_file,
                                          broker_properties)
from streaming.security.certificates import Certificates, make_certificates

LOCAL_HOST = "127.0.0.1"
HEAP = "-Xmx768m"
STARTED = "Kafka Server started"
CLEANER_LOG = "log-cleaner.log"
SERVER_LOG = "server.log"
_PORTS_FILE = "kcompact-ports.json"
KAFKA_OPTS = "KAFKA_OPTS"  # the environment variable
_LISTEN_PORTS_FROM = 20000
# Every port handed out, a file each naming the process it went to: two processes that each start brokers
# (two pytest workers, two `kcompact broker`s) never get the same port between its check and its bind. In
# /tmp whatever TMPDIR says: every such process on the machine must share it (the test command moves TMPDIR).
_HANDED_OUT = Path("/tmp") / f"kcompact-ports-{os.getuid()}"

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


@dataclass(frozen=True)
class Proxied:
    """A proxy on 127.0.0.1:``proxy`` forwarding to the node's PLAINTEXT listener on ``broker``, both
    chosen before the node starts, so the proxy can exist first."""

    broker: int
    proxy: int


class LocalKafkaError(RuntimeError):
    """The local broker could not start; the message says why and where its log is."""


@dataclass(frozen=True)
class Ports:
    broker: int
    controller: int
    sasl: int
    ssl: int
    sasl_ssl: int
    internal: int = 0  # the brokers' own listener, used when clients come through a proxy


def _ephemeral_low() -> int:
    """The first port of the kernel's range for outgoing connections and bind(0)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port(host: str = LOCAL_HOST) -> int:
    """A port nothing listens on, taken from below the kernel's ephemeral range and never handed out twice
    while the process it went to lives. A port from bind(0) lies in that range, so any outgoing connection
    (another node's, a client's) can take it as its local port before the listener binds it, and the node
    then exits on start."""
    low = _ephemeral_low()
    for _ in range(200):
        port = random.randrange(_LISTEN_PORTS_FROM, low) if low > _LISTEN_PORTS_FROM + 1000 else 0
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind((host, port))
            except OSError:
                continue
            port = s.getsockname()[1]
        if _claimed(port):
            return port
    raise LocalKafkaError(f"no free port on {host} below {low}")


def _claimed(port: int) -> bool:
    """``port`` is this process's now, unless this or another living process was handed it before."""
    _HANDED_OUT.mkdir(mode=0o700, exist_ok=True)
    lock = os.open(_HANDED_OUT, os.O_RDONLY)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)  # the directory itself: released as it closes
        entry = _HANDED_OUT / str(port)
        try:
            holder = int(entry.read_text())
        except (OSError, ValueError):
            holder = None
        if holder is not None and (holder == os.getpid() or _alive(holder)):
            return False
        entry.write_text(str(os.getpid()))
        return True
    finally:
        os.close(lock)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's: alive
        return True
    return True


def jvm_options() -> list[str]:
    """KAFKA_OPTS, as Kafka's own start scripts (kafka-run-class.sh) add it to every JVM they start: the test
    session sets it to spend less CPU compiling in brokers that live minutes (tests/conftest.py)."""
    return os.environ.get(KAFKA_OPTS, "").split()  # split on blanks, quotes kept, as the scripts' $KAFKA_OPTS is


def cluster_id() -> str:
    """The form Kafka's own ``random-uuid`` prints: 16 random bytes, URL-safe base64, no padding, and, as
    Kafka's Uuid.randomUuid does, never starting with '-' (a command line would take it for an option)."""
    while (cid := base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")).startswith("-"):
        pass
    return cid


def die_with_parent() -> None:
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
    """One node's process over one data directory; started, killed and started again at will. Alone it is a
    single-node cluster; streaming.brokers.local.cluster makes three of them one cluster."""

    def __init__(self, data_dir: str | Path | None = None, port: int | None = None,
                 sasl_users: Mapping[str, str] | None = None, jars: KafkaJars | None = None, node_id: int = 1,
                 replication: Replication = SINGLE_NODE, heap: str = HEAP,
                 certificates: Certificates | None = None, proxied: Proxied | None = None) -> None:
        """``proxied``: clients reach the PLAINTEXT listener through a proxy, which the node advertises in its
        place (streaming.brokers.properties)."""
        self.owns_dir = data_dir is None
        self.data_dir = Path(tempfile.mkdtemp(prefix="kcompact-kafka-")) if data_dir is None else Path(data_dir)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.sasl_users = dict(sasl_users or {})
        self.jars = jars or ensure_kafka_jars()
        self.node_id = node_id
        self.replication = replication
        self.heap = heap
        self.proxied_port = proxied.proxy if proxied else None
        self.ports = self._ports(proxied.broker if proxied else port)
        # a node of a cluster is given the cluster's; a broker alone makes its own, kept across restarts
        self.certificates = certificates or make_certificates(self.data_dir / "tls")
        self.voters = self.voter  # a cluster hands every node the whole quorum before it starts
        self.cluster_id = cluster_id()  # used when the storage is formatted, i.e. on the first start only
        self.proc: subprocess.Popen | None = None

    @property
    def bootstrap_servers(self) -> str:
        """Where clients connect: through the proxy when there is one."""
        return f"{LOCAL_HOST}:{self.proxied_port or self.ports.broker}"

    @property
    def direct_bootstrap_servers(self) -> str:
        """Around the proxy (the brokers' own listener, whose metadata names no proxy): a test's checks
        still reach the node while a fault cuts its clients off."""
        return f"{LOCAL_HOST}:{self.ports.internal}" if self.proxied_port else self.bootstrap_servers

    @property
    def sasl_bootstrap_servers(self) -> str:
        return f"{LOCAL_HOST}:{self.ports.sasl}"

    @property
    def ssl_bootstrap_servers(self) -> str:
        return f"{LOCAL_HOST}:{self.ports.ssl}"

    @property
    def sasl_ssl_bootstrap_servers(self) -> str:
        return f"{LOCAL_HOST}:{self.ports.sasl_ssl}"

    @property
    def voter(self) -> str:
        """This node as a member of the quorum (controller.quorum.voters)."""
        return f"{self.node_id}@{LOCAL_HOST}:{self.ports.controller}"

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    @property
    def cleaner_log(self) -> Path:
        return self.data_dir / CLEANER_LOG

    @property
    def server_log(self) -> Path:
        return self.data_dir / SERVER_LOG

    @property
    def stdout_log(self) -> Path:
        return self.data_dir / "stdout.log"

    def _ports(self, port: int | None) -> Ports:
        """The ports of an earlier start on this data directory (a restart keeps its address), else free ones."""
        saved = self.data_dir / _PORTS_FILE
        if saved.exists():
            ports = Ports(**json.loads(saved.read_text()))
            if port is None or port == ports.broker:
                return ports
        ports = Ports(port or free_port(), *(free_port() for _ in range(5)))
        saved.write_text(json.dumps(ports.__dict__))
        return ports

    def properties(self) -> dict[str, str]:
        p = self.ports
        listeners = Listeners(*(f"{LOCAL_HOST}:{port}" for port in (p.broker, p.controller, p.sasl, p.ssl, p.sasl_ssl)),
                              proxied=f"{LOCAL_HOST}:{self.proxied_port}" if self.proxied_port else "",
                              internal=f"{LOCAL_HOST}:{p.internal}")
        return broker_properties(self.node_id, listeners, self.voters, str(self.data_dir / "logs"), self.sasl_users,
                                 self.certificates, self.replication)

    def _java(self, main: str, *args: str, heap: str | None = None) -> list[str]:
        java = shutil.which("java")
        if java is None:
            raise LocalKafkaError("java is missing: the local Apache Kafka broker needs Java 17 or newer "
                                  "(scripts/bootstrap.sh installs it)")
        return [java, heap or self.heap, "-Xms128m", "-XX:+UseG1GC", "-Djava.awt.headless=true", *jvm_options(),
                f"-Dlog4j2.configurationFile={self.data_dir / 'log4j2.yaml'}",
                "-cp", self.jars.classpath, main, *args]

    def _format_once(self, properties: Path) -> None:
        if (self.data_dir / "logs" / "meta.properties").exists():
            return
        done = subprocess.run(self._java("kafka.tools.StorageTool", "format", "-t", self.cluster_id,
                                         "-c", str(properties), heap="-Xmx256m"),
                              capture_output=True, text=True, stdin=subprocess.DEVNULL)
        if done.returncode != 0:
            raise LocalKafkaError(f"formatting the local broker's storage in {self.data_dir} failed: "
                                  f"{(done.stdout + done.stderr).strip()[-500:]}")

    def start(self, timeout_s: float = 120.0) -> None:
        """Start the process and return once its log says the server has started (the broker helper then
        waits for it to answer metadata)."""
        self.launch()
        self.wait_started(timeout_s)

    def launch(self) -> None:
        """Start the process without waiting: a node of a cluster starts only once a quorum of its nodes runs."""
        properties = self.data_dir / "server.properties"
        properties.write_text(as_properties_file(self.properties()))
        (self.data_dir / "log4j2.yaml").write_text(_LOG4J2.format(dir=self.data_dir))
        self._format_once(properties)
        self._log_seen = self.server_log.stat().st_size if self.server_log.exists() else 0
        self._stdout_seen = self.stdout_log.stat().st_size if self.stdout_log.exists() else 0
        with open(self.stdout_log, "ab") as out:
            self.proc = subprocess.Popen(self._java("kafka.Kafka", str(properties)), stdout=out,
                                         stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         preexec_fn=die_with_parent)  # setsid + pdeathsig

    def wait_started(self, timeout_s: float = 120.0) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise LocalKafkaError(f"the local Apache Kafka broker exited with {self.proc.returncode} while "
                                      f"starting ({self._failure()}); see {self.server_log} and "
                                      f"{self.stdout_log}")
            if self.server_log.exists():
                with open(self.server_log, "rb") as f:
                    f.seek(self._log_seen)
                    if STARTED.encode() in f.read():
                        return
            time.sleep(0.2)
        self.kill()
        raise LocalKafkaError(f"the local Apache Kafka broker did not start within {timeout_s:.0f}s; "
                              f"see {self.server_log}")

    def _failure(self) -> str:
        """The last error this start logged, which is what a reader of the failure wants first."""
        lines: list[str] = []
        for log, seen in ((self.server_log, self._log_seen), (self.stdout_log, self._stdout_seen)):
            with contextlib.suppress(FileNotFoundError), open(log, "rb") as f:
                f.seek(seen)
                lines += [ln for ln in f.read().decode(errors="replace").splitlines()
                          if " ERROR " in ln or "Exception:" in ln]
        return lines[-1].strip()[:400] if lines else "nothing logged"

    def kill(self) -> None:
        """SIGKILL, as a crash: nothing flushed, no controlled shutdown."""
        if self.proc is not None:
            _signal_group(self.proc, signal.SIGKILL, 30.0)

    def terminate(self) -> None:
        """A controlled shutdown (SIGTERM, SIGKILL after a grace period); the data stays for a restart."""
        if self.proc is not None:
            _signal_group(self.proc, signal.SIGTERM, 60.0)

    def stop(self) -> None:
        """terminate(), and the data gone if it was ours."""
        self.terminate()
        if self.owns_dir:
            shutil.rmtree(self.data_dir, ignore_errors=True)
