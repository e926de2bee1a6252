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
from typing import Iterable, Mapping

from streaming import redaction

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
# Their errors are ours to report: the job reports py4j's, and streaming.brokers a container that fails (one
# WARNING line, then the local broker); testcontainers' own INFO ("Pulling image" for an image built here) is noise.
QUIET_LOGGERS = ("py4j", "testcontainers")
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


def configure(level: str, fmt: str) -> None:
    global _handler
    handler = _handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else logging.Formatter(TEXT_FORMAT))
    handler.addFilter(redaction.MaskingFilter())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
    for name in QUIET_LOGGERS:
        logging.getLogger(name).setLevel(logging.DEBUG if level == "DEBUG" else logging.CRITICAL)


def stream_to(stream) -> None:
    """Send log lines to another stream (a live progress display prints them above itself)."""
    if _handler is not None:
        _handler.setStream(stream)


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
