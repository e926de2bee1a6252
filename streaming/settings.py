"""Every compaction setting, once: Kafka's name, its type, default, check, scope and meaning.

Modelled on Kafka's ``LogConfig`` / ``CleanerConfig`` definitions (``define(name, type, default, validator,
doc)``). The cleaner's config, the log's config, the command line, the saved spec and docs/configuration.md all
read this table, so a key has one default and one set of limits wherever it is used.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Callable

LONG_MAX = 2**63 - 1


class Scope(str, Enum):
    TOPIC = "topic"      # a Kafka topic config: a source topic's own value is the default for its log
    CLEANER = "cleaner"  # Kafka's log.cleaner.* broker settings: one value for the job's cleaner
    JOB = "job"          # kcompact's own, set on the command line only


class Type(str, Enum):
    LONG = "long"
    DOUBLE = "double"
    STRING = "string"
    LIST = "list"


@dataclass(frozen=True)
class Setting:
    name: str
    type: Type
    default: Any
    scope: Scope
    doc: str
    check: Callable[[Any], str | None] = lambda value: None  # what is wrong with a value, or None
    choices: tuple[str, ...] = ()  # for a STRING with a fixed set of values

    def parse(self, text: str) -> Any:
        """A value from its text (the command line, a topic config, the saved spec); ValueError names why."""
        text = text.strip()
        if self.type is Type.LONG:
            try:
                return int(text)
            except ValueError:
                raise ValueError("not a whole number") from None
        if self.type is Type.DOUBLE:
            try:
                return float(text)
            except ValueError:
                raise ValueError("not a number") from None
        if self.type is Type.LIST:
            return ",".join(sorted(p.strip() for p in text.split(",") if p.strip()))
        if self.choices:
            return text.lower()
        return text or None

    def render(self, value: Any) -> str:
        """The text parse() reads back (Kafka's form)."""
        if value is None:
            return ""
        return str(value.value) if isinstance(value, Enum) else str(value)

    def problem(self, value: Any) -> str | None:
        """What is wrong with a parsed value, or None."""
        if self.choices and value not in self.choices:
            return f"unknown value {value!r}; one of {', '.join(self.choices)}"
        return self.check(value)


def at_least(low: int | float) -> Callable[[Any], str | None]:
    return lambda value: None if value >= low else f"must be >= {low}, got {value}"


def between(low: float, high: float, closed: bool = True) -> Callable[[Any], str | None]:
    def check(value: Any) -> str | None:
        ok = low <= value <= high if closed else low < value < high
        return None if ok else f"must be in {'[' if closed else '('}{low}, {high}{']' if closed else ')'}, got {value}"
    return check


def _positive(value: Any) -> str | None:
    return None if value > 0 else f"must be > 0, got {value}"


def _cleanup_policy(value: str) -> str | None:
    policies = set(value.split(","))
    if policies <= {"compact", "delete"} and "compact" in policies:
        return None
    return f"must be 'compact' or 'compact,delete' for a compactor, got {value!r}"


SETTINGS: dict[str, Setting] = {s.name: s for s in (
    Setting("cleanup.policy", Type.LIST, "compact", Scope.TOPIC,
            "compact (with delete, a source's retention is its own business); anything else is refused",
            _cleanup_policy),
    Setting("segment.bytes", Type.LONG, 1_073_741_824, Scope.TOPIC,
            "the active segment rolls at this size", at_least(14)),
    Setting("segment.ms", Type.LONG, 604_800_000, Scope.TOPIC,
            "the active segment rolls at this age (or max.compaction.lag.ms, if less)", at_least(1)),
    Setting("segment.jitter.ms", Type.LONG, 0, Scope.TOPIC,
            "a random amount up to this is taken off segment.ms, per partition", at_least(0)),
    Setting("min.cleanable.dirty.ratio", Type.DOUBLE, 0.5, Scope.TOPIC,
            "a log is cleaned when its dirty bytes reach this share", between(0.0, 1.0)),
    Setting("min.compaction.lag.ms", Type.LONG, 0, Scope.TOPIC,
            "a record stays uncompacted at least this long", at_least(0)),
    Setting("max.compaction.lag.ms", Type.LONG, LONG_MAX, Scope.TOPIC,
            "a record is compacted at most this long after it was written (KIP-354)", at_least(1)),
    Setting("delete.retention.ms", Type.LONG, 86_400_000, Scope.TOPIC,
            "a tombstone is kept this long after its log was cleaned, then removed", at_least(0)),
    Setting("message.timestamp.after.max.ms", Type.LONG, 3_600_000, Scope.TOPIC,
            "a record stamped further ahead than this is timed by its append for rolls and lags", at_least(0)),
    Setting("file.delete.delay.ms", Type.LONG, 60_000, Scope.TOPIC,
            "an object no manifest needs any more is deleted after this", at_least(0)),
    Setting("compaction.strategy", Type.STRING, "offset", Scope.TOPIC,
            "which record of a key wins: the last by offset, by timestamp, or by a version header (KIP-280)",
            choices=("offset", "timestamp", "header")),
    Setting("compaction.strategy.header", Type.STRING, None, Scope.TOPIC,
            "the version header, with compaction.strategy=header"),
    Setting("compaction.keyless.policy", Type.STRING, "drop", Scope.JOB,
            "a record without a key: dropped and counted (Kafka), sent to --dead-letter-topic, or an error",
            choices=("drop", "dead-letter", "fail")),
    Setting("erase.audit.keys", Type.STRING, "hash", Scope.JOB,
            "the erase audit (kcompact erasures) names each tombstone's key by its SHA-256, by the key itself, "
            "or keeps no audit", choices=("hash", "key", "off")),
    Setting("log.cleaner.dedupe.buffer.size", Type.LONG, 134_217_728, Scope.CLEANER,
            "bytes of the offset map; a pass cleans as far as the keys it holds", at_least(48)),
    Setting("log.cleaner.io.buffer.load.factor", Type.DOUBLE, 0.9, Scope.CLEANER,
            "how full the offset map may get", between(0.0, 1.0, closed=False)),
    Setting("log.cleaner.io.max.bytes.per.second", Type.DOUBLE, float("inf"), Scope.CLEANER,
            "the cleaner's read and write rate, throttled", _positive),
    Setting("log.cleaner.backoff.ms", Type.LONG, 15_000, Scope.CLEANER,
            "the wait before an uncleanable partition is tried again", at_least(0)),
)}


def setting_field(name: str) -> Any:
    """A config dataclass's field holding setting ``name``: the table's default, and the name in its metadata
    (the field's key when parsing, rendering and checking)."""
    return field(default=SETTINGS[name].default, metadata={"setting": name})


def markdown_table() -> str:
    """The list of settings in docs/configuration.md."""
    rows = ["| key | scope | type | default | meaning |", "|---|---|---|---|---|"]
    bar = " \\| "  # a | inside a table cell
    for s in SETTINGS.values():
        shown = s.render(s.default) or "(none)"
        values = f" ({bar.join(s.choices)})" if s.choices else ""
        rows.append(f"| `{s.name}` | {s.scope.value} | {s.type.value}{values} | `{shown}` | {s.doc} |")
    return "\n".join(rows)


if __name__ == "__main__":
    print(markdown_table())
