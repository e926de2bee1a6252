"""Log output: levels, a text or JSON-lines format, and secrets masked on every line.

JSON lines are for log shippers (one object per record: time, level, logger, message, and the exception
when there is one); text is for people. Both go to stderr, so stdout stays the command's own output.
Spark's Python workers are other processes: the driver's choice reaches them through the environment
(LEVEL_ENV, FORMAT_ENV, inherited in local mode and set as spark.executorEnv.* for executors), and each
task calls configure_worker() before it logs.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from datetime import datetime, timezone
from typing import Iterable, Mapping, TextIO

from streaming.security import redaction

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
# Their errors are ours to report: the job reports py4j's, and streaming.brokers a container that fails (one
# WARNING line, then the local broker); testcontainers' own INFO ("Pulling image" for an image built here) is noise.
QUIET_LOGGERS = ("py4j", "testcontainers")
# The state store's client (boto3): at DEBUG each call is pages of headers and signatures, and a connection
# error it meets is logged with its stack though the call is tried again; what waits or fails is ours to say
# (streaming.log.store_watch), so it says only its warnings, whatever the level.
CLIENT_LOGGERS = ("boto3", "botocore", "urllib3", "s3transfer")
LEVEL_ENV = "KCOMPACT_LOG_LEVEL"
FORMAT_ENV = "KCOMPACT_LOG_FORMAT"
_worker_configured = False


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        doc = {"time": datetime.fromtimestamp(record.created, timezone.utc).isoformat(timespec="milliseconds"),
               "level": record.levelname, "logger": record.name, "message": record.getMessage()}
        if record.exc_text:
            doc["exception"] = record.exc_text
        elif record.exc_info:
            doc["exception"] = self.formatException(record.exc_info)
        return json.dumps(doc, ensure_ascii=False)


_handler: logging.StreamHandler | None = None
_handler_home: TextIO = sys.stderr  # where configure() pointed the handler
_routed: TextIO | None = None


def configure(level: str, fmt: str) -> None:
    global _handler, _handler_home
    _handler_home = sys.stderr
    handler = _handler = logging.StreamHandler(_handler_home)
    handler.setFormatter(JsonFormatter() if fmt == "json" else logging.Formatter(TEXT_FORMAT))
    handler.addFilter(redaction.MaskingFilter())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
    for name in QUIET_LOGGERS:
        logging.getLogger(name).setLevel(logging.DEBUG if level == "DEBUG" else logging.CRITICAL)
    for name in CLIENT_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)


def route_through(stream: TextIO | None) -> None:
    """Send log lines, this process's and those passed on from others (pass_on), to ``stream``: a live
    progress display prints them above itself. None: back to stderr."""
    global _routed
    _routed = stream
    if _handler is not None:
        _handler.setStream(stream or _handler_home)


def pass_on(line: str, out: int) -> None:
    """A line another process already formatted (a Spark worker's log line, read from the JVM's stderr):
    through the live display while one runs, so it never lands after the display's line, else to ``out``."""
    stream, handler = _routed, _handler
    if stream is None or handler is None:
        os.write(out, (line + "\n").encode())
        return
    with handler.lock:  # the lock the handler writes under: the display's proxy buffers until a newline
        stream.write(line + "\n")
        stream.flush()


def for_workers(level: str, fmt: str) -> dict[str, str]:
    """Hand the choice to Spark's Python workers; returns the Spark settings that carry it to executors."""
    os.environ[LEVEL_ENV], os.environ[FORMAT_ENV] = level, fmt
    return {f"spark.executorEnv.{LEVEL_ENV}": level, f"spark.executorEnv.{FORMAT_ENV}": fmt}


def configure_worker(secret_settings: Iterable[Mapping[str, str]] = ()) -> None:
    """In a Spark task: the driver's log level and format (once per worker process), and this job's
    secret values registered for masking (the task's settings carry them)."""
    global _worker_configured
    redaction.register(secret_settings)
    if not _worker_configured and LEVEL_ENV in os.environ:
        configure(os.environ[LEVEL_ENV], os.environ.get(FORMAT_ENV, "text"))
        _worker_configured = True
