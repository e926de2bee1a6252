"""Which topics a job reads and where it starts, as Kafka consumers and Spark's Kafka source name them:
topics by name (subscribe) or every topic a pattern matches whole (subscribePattern), and startingOffsets.
One type each for the command line, the saved mapping, topic sync and the source, so they cannot disagree."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Iterable, Mapping, Sequence

from streaming.errors import UsageError
from streaming.names import names_text
from streaming.partition_id import PartitionId, offsets_from_json, offsets_to_json

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


def regex_problem(text: str) -> str | None:
    """What is wrong with a regular expression given by a user (topics, groups), or None: one wording for
    every option and config-file key that takes one."""
    try:
        re.compile(text)
    except re.error as exc:
        return f"not a regular expression: {exc}"
    return None


def subscription_of(names: Sequence[str], pattern: str | None, names_as: str = "--source-topic (repeatable)",
                    pattern_as: str = "--source-topic-pattern") -> Subscription:
    """Named topics or a pattern, refused in one line naming the options they came from."""
    names = tuple(n.strip() for n in names if n.strip())
    if bool(names) == (pattern is not None):
        raise UsageError(f"give {names_as} or {pattern_as}, not both and not neither")
    if pattern is None:
        return Subscribe(names)
    problem = regex_problem(pattern)
    if problem:
        raise UsageError(f"{pattern_as.split(' (')[0]} {pattern!r} is {problem}")
    return SubscribePattern(pattern)


def subscription_from_doc(doc: Mapping) -> Subscription:
    """The form to_doc wrote (a saved mapping)."""
    return SubscribePattern(doc["pattern"]) if "pattern" in doc else Subscribe(tuple(doc["names"]))


EARLIEST, LATEST = -2, -1  # Kafka's ListOffsets codes, as startingOffsets takes them per partition


@dataclass(frozen=True)
class StartingOffsets:
    """Where a partition the checkpoint does not know yet starts: every one at its log start or end, or
    the offsets given for the partitions of the topics named (a pattern's topic not named starts at its
    log start)."""

    everywhere: int | None = EARLIEST  # EARLIEST or LATEST for every partition; None: ``given``
    given: Mapping[PartitionId, int] = field(default_factory=dict)

    @property
    def topics(self) -> set[str]:
        return {pid.topic for pid in self.given}

    def to_text(self) -> str:
        """What parse() reads: Spark's startingOffsets."""
        if self.everywhere is not None:
            return "earliest" if self.everywhere == EARLIEST else "latest"
        return offsets_to_json(self.given)

    @classmethod
    def parse(cls, text: str, subscription: Subscription, option: str = "--starting-offsets") -> "StartingOffsets":
        """earliest, latest or JSON like {"topic":{"0":23,"1":-2}}, refused in one line naming ``option``."""
        text = text.strip()
        if text in ("earliest", "latest"):
            return cls(EARLIEST if text == "earliest" else LATEST)
        try:
            given = offsets_from_json(text)
            odd = sorted(f"{pid}: {o}" for pid, o in given.items() if o < EARLIEST)
            if odd:
                raise ValueError(f"negative offsets other than -2 and -1 mean nothing ({', '.join(odd)})")
        except (ValueError, TypeError) as exc:
            raise UsageError(f"{option} must be earliest, latest or JSON like {{\"topic\":{{\"0\":23,\"1\":-2}}}} "
                             f"(-2 earliest, -1 latest): {exc}") from None
        unknown = sorted(t for t in json.loads(text) if not subscription.matches(t))  # named with no partition too
        if unknown:
            raise UsageError(f"{option} names topics not subscribed: {unknown}")
        return cls(None, given)


def select_topics(topics: Iterable[str], selectors: Sequence[str], among: str) -> list[str]:
    """The topics ``selectors`` name, each a name or a regular expression matched whole (a command's --topic);
    one that selects nothing is a usage error naming ``among`` (whose topics they are) and what they are."""
    known = sorted(topics)
    chosen: set[str] = set()
    for selector in selectors:
        try:
            pattern = re.compile(selector)
        except re.error as exc:
            raise UsageError(f"--topic {selector!r} is neither a topic name nor a regular expression: {exc}") from None
        found = [t for t in known if t == selector or pattern.fullmatch(t)]
        if not found:
            raise UsageError(f"topic {selector!r} is not {among}, nor as a pattern matches one; they are "
                             f"{names_text(known) or 'none yet'}")
        chosen.update(found)
    return sorted(chosen)
