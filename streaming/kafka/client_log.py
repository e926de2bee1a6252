"""librdkafka's own log lines, through Python logging instead of straight to stderr.

A cluster that does not answer makes librdkafka print a FAIL line per broker and retry, hundreds in a
minute, burying the one error kcompact gives. Handed a logger (confluent-kafka's ``logger`` setting), the
client passes them here instead: repeats are dropped, and each line is DEBUG, since kcompact reports what
a failure means itself; only a refused login carries news the job's own error may not, and it is WARNING.
"""

from __future__ import annotations

import logging
import re
import time
from typing import Mapping

NEWS = re.compile(r"SASL authentication|Authentication failed|SSL handshake failed|certificate verify failed", re.I)
REPEAT_WINDOW_S = 60.0
_MAX_REMEMBERED = 2000


class LibrdkafkaLog:
    """What confluent-kafka calls: ``log(level, fmt, facility, client name, message)``. Lines that differ
    only in numbers (counts, times, ports) within REPEAT_WINDOW_S are one line."""

    def __init__(self, name: str = "librdkafka", news: bool = True) -> None:
        self._log = logging.getLogger(name)
        self._seen: dict[str, float] = {}
        self._news = news

    def log(self, level: int, fmt: str, *args) -> None:
        text = fmt % args if args else fmt
        now = time.monotonic()
        shape = re.sub(r"\d+", "#", text)
        if now - self._seen.get(shape, -REPEAT_WINDOW_S) < REPEAT_WINDOW_S:
            return
        if len(self._seen) > _MAX_REMEMBERED:
            self._seen.clear()
        self._seen[shape] = now
        news = self._news and NEWS.search(text) and level >= logging.WARNING
        self._log.log(logging.WARNING if news else logging.DEBUG, "%s", text)


_LOG = LibrdkafkaLog()
_REPORTED = LibrdkafkaLog(news=False)


def with_client_log(settings: Mapping[str, object], refusals_reported: bool = False) -> dict[str, object]:
    """A client's settings with librdkafka's log routed through Python logging; every client kcompact
    makes is configured through here. ``refusals_reported``: the caller names a refused login in its own
    error (the admin client of streaming.kafka.admin), so librdkafka's line about it would say it twice."""
    return {**settings, "logger": _REPORTED if refusals_reported else _LOG}
