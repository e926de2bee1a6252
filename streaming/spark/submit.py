"""The spark-submit command that runs `kcompact run` on a Spark cluster, with what a bare spark-submit lacks.

A bare ``spark-submit`` of the application file needs SPARK_HOME (pip's PySpark finds it only from an
activated virtualenv), logs Spark's INFO lines in log4j's own format, and lets Spark pick the driver's
address: on a host whose name resolves to loopback it takes the first other interface, which the cluster
may not reach. The plan here sets each: Spark's home is the installed PySpark's, the driver JVM logs
through kcompact's log4j configuration (JSON lines that streaming.spark.jvm_log turns into kcompact's
format, WARN and above), the driver and executors run this interpreter unless told otherwise, and the
driver's address is the one this host reaches the master from.
"""

from __future__ import annotations

import functools
import ipaddress
import os
import signal
import socket
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlparse

from streaming.spark import jvm_log
from streaming.spark.home import choose_spark_home, pyspark_dir

DRIVER_JAVA_OPTIONS = "spark.driver.extraJavaOptions"
LOOPBACK = "127.0.0.1"


@dataclass(frozen=True)
class SubmitPlan:
    """``application``: the file spark-submit runs (streaming.cli.submit); ``run_args``: the arguments of
    `kcompact run`; ``conf``: --conf settings, which win over ours."""

    application: str
    master: str
    run_args: tuple[str, ...]
    conf: dict[str, str] = field(default_factory=dict)
    packages: str | None = None
    archives: str | None = None
    driver_host: str | None = None
    log_level: str = "INFO"
    log_format: str = "text"

    @functools.cached_property
    def host(self) -> str | None:
        return driver_address(self.master, self.driver_host)

    def command(self) -> list[str]:
        ours = {"spark.pyspark.python": sys.executable, "spark.pyspark.driver.python": sys.executable}
        host = self.host
        if host:
            ours["spark.driver.host"] = host
        settings = {**ours, **self.conf}
        settings[DRIVER_JAVA_OPTIONS] = f"{jvm_log.java_options(self.log_level)} {self.conf.get(DRIVER_JAVA_OPTIONS, '')}".strip()
        argv = [os.path.join(spark_home(), "bin", "spark-submit"), "--master", self.master]
        for key, value in settings.items():
            argv += ["--conf", f"{key}={value}"]
        if self.packages:
            argv += ["--packages", self.packages]
        if self.archives:
            argv += ["--archives", self.archives]
        return [*argv, self.application, "--log-level", self.log_level, "--log-format", self.log_format, "run",
                *self.run_args]

    def environment(self) -> dict[str, str]:
        env = {**os.environ, "SPARK_HOME": spark_home(), "PYSPARK_PYTHON": sys.executable}
        host = self.host
        if host:
            env["SPARK_LOCAL_IP"] = host  # what the driver binds; spark.driver.host is what executors call
        return env


def spark_home() -> str:
    return choose_spark_home() or os.environ.get("SPARK_HOME") or pyspark_dir()


def driver_address(master: str, given: str | None = None) -> str | None:
    """The address executors reach the driver at: the one given, else $SPARK_LOCAL_IP, else the one this host
    reaches the master from; None lets Spark choose."""
    return given or os.environ.get("SPARK_LOCAL_IP") or address_towards(master)


def master_host(master: str) -> str | None:
    """The host of a cluster manager's URL: spark://h:7077 (or h1:7077,h2:7077), k8s://https://h:6443;
    None for local[...] and yarn, whose address comes from the Hadoop configuration."""
    if master.startswith("local") or master == "yarn":
        return None
    url = master.removeprefix("k8s://")
    first = url.split(",")[0]
    parsed = urlparse(first if "://" in first else f"spark://{first}")
    return parsed.hostname


def address_towards(master: str) -> str | None:
    """The local address this host uses to reach the master (no packet is sent: a UDP socket's connect
    only picks the route); 127.0.0.1 for a master on this host, None when it cannot be told."""
    host = master_host(master)
    if host is None:
        return LOOPBACK if master.startswith("local") else None
    try:
        target = socket.getaddrinfo(host, 7077, socket.AF_INET, socket.SOCK_DGRAM)[0][4][0]
    except OSError:
        return None
    if ipaddress.ip_address(target).is_loopback:
        return LOOPBACK
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect((target, 7077))
        except OSError:
            return None
        return probe.getsockname()[0]


def run_submitted(plan: SubmitPlan) -> int:
    """spark-submit as a child, its output routed as a local run's is: Spark's log4j lines and the job's
    log lines on stderr in kcompact's format, the job's own output on stdout. SIGTERM is passed on."""
    child = subprocess.Popen(plan.command(), env=plan.environment(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             stdin=subprocess.DEVNULL)
    # Ctrl-C reaches the whole foreground process group, the job's driver too, which stops as a local run
    # does; this process waits for it. SIGTERM, sent to this process alone, is passed on to the driver:
    # spark-submit's JVM would end at once and take the driver with it, mid-batch.
    previous = {signal.SIGTERM: signal.signal(signal.SIGTERM, lambda *_: _terminate_driver(child, plan.application)),
                signal.SIGINT: signal.signal(signal.SIGINT, lambda *_: jvm_log.STOP_BEGUN.set())}
    pumps = [threading.Thread(target=jvm_log.pump, args=(os.dup(child.stderr.fileno()), 2), daemon=True),
             threading.Thread(target=jvm_log.pump_driver_output, args=(os.dup(child.stdout.fileno()), 1, 2),
                              daemon=True)]
    try:
        for pump in pumps:
            pump.start()
        code = child.wait()
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    for pump in pumps:
        pump.join(10)
    return code


def _terminate_driver(child: subprocess.Popen, application: str) -> None:
    """SIGTERM to the Python driver spark-submit started (its child running ``application``), else to
    spark-submit itself: the job's stop begins."""
    jvm_log.STOP_BEGUN.set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])  # after the command: state, ppid, ...
            argv = (stat.parent / "cmdline").read_bytes().split(b"\0")
        except (OSError, IndexError, ValueError):  # a process that ended meanwhile
            continue
        if ppid == child.pid and application.encode() in argv:
            os.kill(int(stat.parent.name), signal.SIGTERM)
            return
    child.send_signal(signal.SIGTERM)
