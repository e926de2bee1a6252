"""Java's .properties form, read and written: the form Kafka users keep settings and secrets in."""

from __future__ import annotations

from typing import Mapping, TextIO

import javaproperties


def load(f: TextIO) -> dict[str, str]:
    """Raises ValueError for text that is not in the form."""
    return javaproperties.load(f)


def loads(text: str) -> dict[str, str]:
    return javaproperties.loads(text)


def dumps(properties: Mapping[str, str]) -> str:
    """In the given order, without the timestamp comment."""
    return javaproperties.dumps(dict(properties), timestamp=False, sort_keys=False)
