"""Keeping credentials out of everything the compactor writes: logs, errors, status, its state files.

Two nets. Settings whose names say they are secret (sasl.password, ssl.key.password, *secret*, ...) are
shown redacted wherever settings are shown. And every secret value given on the command line is
registered here, so that a log record or error message carrying one (a client error quoting its config,
an exception's repr) has it replaced before it is printed, whatever the message's shape.
"""

from __future__ import annotations

import logging
import re
import threading
from typing import Iterable, Mapping

from streaming.configuration.config_providers import REFERENCE

REDACTED = "[redacted]"
SECRET_KEY = re.compile(r"(password|secret|\.key$|token|credential|sasl\.jaas\.config)", re.IGNORECASE)
# key=value / key: value pairs with a secret-looking key, for text from sources we never registered
SECRET_PAIR = re.compile(r"((?:[\w.-]*(?:password|secret|token|credential)[\w.-]*)\s*[=:]\s*)(?!\$\{)"
                         r"(\"[^\"]*\"|'[^']*'|[^\s,;}\]\)]+)", re.IGNORECASE)


def _reference(value: str) -> bool:
    """A config-provider reference names where a secret is, and is shown as it is."""
    return REFERENCE.fullmatch(value) is not None


def redact(config: Mapping[str, str]) -> dict[str, str]:
    """Client settings as they may be shown."""
    return {k: (REDACTED if SECRET_KEY.search(k) and not _reference(v) else v) for k, v in config.items()}


class Masker:
    """The secret values of this process, and the text with them replaced."""

    def __init__(self) -> None:
        self._values: set[str] = set()
        self._lock = threading.Lock()

    def register(self, config: Mapping[str, str]) -> None:
        with self._lock:
            self._values |= {v for k, v in config.items()
                             if SECRET_KEY.search(k) and len(v) >= 3 and not _reference(v)}

    def register_values(self, values: Iterable[object]) -> None:
        with self._lock:
            self._values |= {v for v in values if isinstance(v, str) and len(v) >= 3}

    def mask(self, text: str) -> str:
        for value in sorted(self._values, key=len, reverse=True):
            text = text.replace(value, REDACTED)
        return SECRET_PAIR.sub(lambda m: m.group(1) + REDACTED, text)


MASKER = Masker()


def mask(text: str) -> str:
    return MASKER.mask(text)


def register(configs: Iterable[Mapping[str, str]]) -> None:
    for config in configs:
        MASKER.register(config)


def register_values(values: Iterable[object]) -> None:
    """Values that are secret whatever their setting's name (those a config-provider reference named)."""
    MASKER.register_values(values)


class MaskingFilter(logging.Filter):
    """Installed on every handler: the message and any traceback are rendered, then masked."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg = mask(record.getMessage())
        record.args = None
        if record.exc_info and record.exc_info[1] is not None:
            record.exc_text = mask(logging.Formatter().formatException(record.exc_info))
            record.exc_info = None
        return True
