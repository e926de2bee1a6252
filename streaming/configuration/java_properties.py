"""Java's .properties form, read and written: the form Kafka users keep settings and secrets in."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Mapping, TextIO

import javaproperties

_CONTINUATION = re.compile(r"(?<!\\)\\\r?\n[ \t\f]*")  # a line's last backslash joins the next line
_WRITTEN_VALUE = re.compile(r"^\s*(?:\\.|[^=:\s\\])*\s*[=:]?\s*(.*)$", re.S)  # key, separator, then the value
_ESCAPE = re.compile(r"\\(.)", re.S)
MEANINGFUL_ESCAPES = "\\tnrfu=:#! "  # what a backslash stands before in Java's form (\uXXXX included)


@dataclass(frozen=True)
class Entry:
    """A key, its value as Java reads it, and the value as written (escapes and all)."""

    key: str
    value: str
    written: str

    @property
    def lost_backslashes(self) -> bool:
        """A backslash the form took out: ``\\.`` or ``\\d`` in ``orders\\..*`` escapes nothing in Java's form,
        so the value reads ``orders..*``, which a regular expression's author rarely means."""
        return any(escaped not in MEANINGFUL_ESCAPES for escaped in _ESCAPE.findall(self.written))


def load(f: TextIO) -> dict[str, str]:
    """Raises ValueError for text that is not in the form."""
    return javaproperties.load(f)


def entries(f: TextIO) -> list[Entry]:
    """Raises ValueError for text that is not in the form."""
    out = []
    for element in javaproperties.parse(f):
        if isinstance(element, javaproperties.KeyValue):
            line = _CONTINUATION.sub("", element.source).rstrip("\r\n")
            written = _WRITTEN_VALUE.match(line).group(1)
            out.append(Entry(element.key, element.value, written))
    return out


def loads(text: str) -> dict[str, str]:
    return javaproperties.loads(text)


def dumps(properties: Mapping[str, str]) -> str:
    """In the given order, without the timestamp comment."""
    return javaproperties.dumps(dict(properties), timestamp=False, sort_keys=False)
