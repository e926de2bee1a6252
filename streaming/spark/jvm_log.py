"""The JVM's stderr, read by the driver and passed through Python logging.

Spark's JVM writes its own lines (log4j, the JVM's module warnings) and those of the Python workers it
starts to the stderr it inherits. The driver starts that JVM with stderr on a pipe it reads: log4j events
arrive as JSON (log4j2.properties beside this file) and go to Python logging under ``spark.<class>``, in
kcompact's format and level; lines already in kcompact's format (the workers' logs) pass as they are.
What Spark says about failures kcompact reports itself (a query that stopped, a task that failed), and a
few start-up notices that need no action, are DEBUG.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import sys
import threading
from pathlib import Path
from typing import Callable, Iterator

from streaming.runtime import logging_setup

LOG4J_CONFIG = Path(__file__).with_name("log4j2.properties")
LEVELS = {"TRACE": logging.DEBUG, "DEBUG": logging.DEBUG, "INFO": logging.INFO, "WARN": logging.WARNING,
          "ERROR": logging.ERROR, "FATAL": logging.CRITICAL}
# Start-up notices and per-batch chatter that need no action.
NOTICES = re.compile("|".join([
    r"Using incubator modules", r"Using Spark's default log4j profile", r"resolves to a loopback address",
    r"Set SPARK_LOCAL_IP if you need to bind", r"Unable to load native-hadoop library",
    r"is not supported in streaming DataFrames/Datasets and will be disabled", r"Failed to cancel job group",
    r"Current batch is falling behind", r"Setting default log level to", r"To adjust logging level use",
    r"Interrupted while joining on",  # Hadoop's Shell, when a stopping query interrupts its thread
]))
# Loggers whose warnings and errors are about failures the job reports itself, in one line.
FAILURES_REPORTED = ("org.apache.spark.sql.execution.streaming", "org.apache.spark.scheduler.TaskSetManager",
                     "org.apache.spark.executor.Executor", "org.apache.spark.scheduler.TaskSchedulerImpl",
                     "org.apache.spark.api.python", "org.apache.spark.sql.execution.python")
COMMAND_LINE = "kcompact: "  # the command's own one-line error and notices
OWN_LINE = re.compile(r'^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} [A-Z]+ |\{"time": )')


def java_options(level: str) -> str:
    """The driver JVM's options: log4j pointed at our configuration, and only the JIT's quick tier, since
    records no longer pass through this JVM and its start-up is what a short run waits for (bench/README.md)."""
    jvm_level = "info" if level == "DEBUG" else "warn"
    return f"-XX:TieredStopAtLevel=1 -Dlog4j2.configurationFile={LOG4J_CONFIG.as_uri()} -Dkcompact.jvm.level={jvm_level}"


def _event(doc: dict) -> tuple[str, int, str]:
    name = doc.get("log.logger", "jvm")
    level = LEVELS.get(str(doc.get("log.level", "INFO")).upper(), logging.INFO)
    message = str(doc.get("message", ""))
    if doc.get("error.message") or doc.get("error.type"):
        message += f" ({doc.get('error.type', '')}: {str(doc.get('error.message', '')).splitlines()[0][:300]})"
    if NOTICES.search(message) or name.startswith(FAILURES_REPORTED):
        level = logging.DEBUG
    return name, level, message


def _pass_on(line: str, out: int) -> None:
    if OWN_LINE.match(line):
        logging_setup.pass_on(line, out)
        return
    if line.startswith("{"):
        try:
            doc = json.loads(line)
        except ValueError:
            doc = None
        if isinstance(doc, dict) and "log.level" in doc:
            name, level, message = _event(doc)
            logging.getLogger(f"spark.{name.rsplit('.', 1)[-1]}").log(level, "%s", message)
            return
    if line.strip():
        logging.getLogger("spark.stderr").debug("%s", line)


# Set once the job's stop has begun (the engine says so: streaming.spark.driver), in this process
STOP_BEGUN = threading.Event()


class PeerClosedTracebacks:
    """Spark's Python processes (the streaming source's runner, a worker) read from a socket to the JVM; when
    a query or the session stops, the JVM closes it and the process prints a traceback ending in EOFError
    (or a reset or broken connection) as it goes. Once the job's stop has begun (``stopping``) that is the
    stop, not a failure: such a traceback is folded into one DEBUG line naming where it was. Before, the same
    traceback is a connection lost mid-run and passes whole, as any other traceback does (at DEBUG)."""

    def __init__(self, emit, stopping: Callable[[], bool] = STOP_BEGUN.is_set) -> None:
        self.emit = emit
        self.stopping = stopping
        self.block: list[str] = []

    def feed(self, line: str) -> None:
        if self.block and not _continues(self.block, line):
            self.flush()
        if self.block or line.startswith(TRACEBACK_START):
            self.block.append(line)
        else:
            self.emit(line)

    def flush(self) -> None:
        block, self.block = self.block, []
        if not block:
            return
        # a block cut short (the process or the JVM gone, another process's line between) is judged by the
        # exceptions it got to
        exceptions = [line for line in block if not line[:1].isspace() and not line.startswith(CHAIN_LINES)]
        if exceptions and all(e.startswith(PEER_CLOSED) for e in exceptions) and self.stopping():
            where = next((m[1] for line in block if (m := SPARK_FILE.search(line))), "a Python process of Spark's")
            logging.getLogger("spark.stderr").debug("%s ended as the JVM closed its connection (%s): a query or the "
                                                    "session stopped", where, exceptions[-1].split(":")[0])
            return
        for line in block:
            self.emit(line)


TRACEBACK_START = "Traceback (most recent call last):"
CHAIN_LINES = (TRACEBACK_START, "During handling of the above exception", "The above exception was the direct cause")
PEER_CLOSED = ("EOFError", "ConnectionResetError", "BrokenPipeError")
EXCEPTION_LINE = re.compile(r"[A-Za-z_][\w.]*(:|$)")
SPARK_FILE = re.compile(r'File ".*/pyspark/([\w/]+\.py)"')


def _continues(block: list[str], line: str) -> bool:
    """Whether ``line`` belongs to the traceback ``block`` holds: a frame, a chaining line, or the exception
    line that ends a traceback (after which only a chaining line continues it)."""
    last = block[-1]
    if line[:1].isspace() or line.startswith(CHAIN_LINES):
        return not (not last[:1].isspace() and not last.startswith(CHAIN_LINES) and line[:1].isspace())
    return last[:1].isspace() and EXCEPTION_LINE.match(line) is not None  # the exception after the frames


def pump(read_fd: int, out: int) -> None:
    """Pass each line the JVM writes to ``read_fd`` on (through logging, or to ``out``), until it closes;
    closes ``read_fd``."""
    def pass_on(line: str) -> None:
        try:
            _pass_on(line, out)
        except Exception:  # noqa: BLE001 (a line that cannot be passed on is not worth the JVM's stderr)
            return

    tracebacks = PeerClosedTracebacks(pass_on)
    with os.fdopen(read_fd, "r", encoding="utf-8", errors="replace") as lines:
        for line in lines:
            if line.strip():
                tracebacks.feed(line.rstrip("\n"))
    tracebacks.flush()


def pump_driver_output(read_fd: int, out: int, err: int) -> None:
    """spark-submit's stdout: its Python driver's stdout and stderr as one stream (Spark's PythonRunner
    merges them). The driver's log lines and its `kcompact:` lines go to ``err``, the rest to ``out``."""
    with os.fdopen(read_fd, "r", encoding="utf-8", errors="replace") as lines:
        for line in lines:
            if OWN_LINE.match(line) or line.startswith(COMMAND_LINE):
                logging_setup.pass_on(line.rstrip("\n"), err)
            else:
                os.write(out, line.encode())


@contextlib.contextmanager
def jvm_stderr_to_logging() -> Iterator[None]:
    """Around the JVM's launch: the processes started inside inherit a stderr that this process reads."""
    read_fd, write_fd = os.pipe()
    real = os.dup(2)
    threading.Thread(target=pump, args=(read_fd, real), name="jvm-stderr", daemon=True).start()
    sys.stderr.flush()
    saved = os.dup(2)
    os.dup2(write_fd, 2)
    os.close(write_fd)
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)
