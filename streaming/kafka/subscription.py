"""Which topics a job reads, as Kafka consumers and Spark's Kafka source (its ConsumerStrategy) name them:
topics by name (subscribe), or every topic a pattern matches whole (subscribePattern). One type for the
command line, the saved mapping, topic sync and the source, so they cannot disagree on what is in."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Mapping, Sequence

from streaming.errors import UsageError

INTERNAL_PREFIX = "__"  # Kafka's own topics (__consumer_offsets, __transaction_state)


@dataclass(frozen=True)
class Subscribe:
    """Topics by name, each of which must exist."""

    names: tuple[str, ...]

    def matches(self, topic: str) -> bool:
        return topic in self.names

    def describe(self) -> str:
        return ", ".join(self.names)

    def to_doc(self) -> dict:
        return {"names": sorted(set(self.names))}


@dataclass(frozen=True)
class SubscribePattern:
    """Every topic whose whole name the pattern matches, as topics appear; Kafka's internal ones never."""

    pattern: str
    names: tuple[str, ...] = ()  # none is required to exist

    def matches(self, topic: str) -> bool:
        return not topic.startswith(INTERNAL_PREFIX) and re.fullmatch(self.pattern, topic) is not None

    def describe(self) -> str:
        return f"topics matching '{self.pattern}'"

    def to_doc(self) -> dict:
        return {"pattern": self.pattern}


Subscription = Subscribe | SubscribePattern


def subscription_of(names: Sequence[str], pattern: str | None, names_as: str = "--source-topic (repeatable)",
                    pattern_as: str = "--source-topic-pattern") -> Subscription:
    """Named topics or a pattern, refused in one line naming the options they came from."""
    names = tuple(n.strip() for n in names if n.strip())
    if bool(names) == (pattern is not None):
        raise UsageError(f"give {names_as} or {pattern_as}, not both and not neither")
    if pattern is None:
        return Subscribe(names)
    try:
        re.compile(pattern)
    except re.error as exc:
        raise UsageError(f"{pattern_as.split(' (')[0]} {pattern!r} is not a regular expression: {exc}") from None
    return SubscribePattern(pattern)


def subscription_from_doc(doc: Mapping) -> Subscription:
    """The form to_doc wrote (a saved mapping)."""
    return SubscribePattern(doc["pattern"]) if "pattern" in doc else Subscribe(tuple(doc["names"]))
