"""Log output: levels, a text or JSON-lines format, and secrets masked on every line.

JSON lines are for log shippers (one object per record: time, level, logger, message, and the exception
when there is one); text is for people. Both go to stderr, so stdout stays the command's own output.
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import datetime, timezone

from streaming.redaction import MaskingFilter

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
QUIET_LOGGERS = ("py4j",)


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        doc = {"time": datetime.fromtimestamp(record.created, timezone.utc).isoformat(timespec="milliseconds"),
               "level": record.levelname, "logger": record.name, "message": record.getMessage()}
        if record.exc_text:
            doc["exception"] = record.exc_text
        elif record.exc_info:
            doc["exception"] = self.formatException(record.exc_info)
        return json.dumps(doc, ensure_ascii=False)


def configure(level: str, fmt: str) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else logging.Formatter(TEXT_FORMAT))
    handler.addFilter(MaskingFilter())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
    for name in QUIET_LOGGERS:
        logging.getLogger(name).setLevel(max(logging.WARNING, logging.getLevelName(level)))
