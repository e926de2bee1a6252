"""Compaction settings under Kafka's own names, with Kafka's defaults, parsed from ``key=value`` strings.

Every value is checked before anything runs, and every error names the offending key, because these come
from command lines and topic configs where a typo must not silently fall back to a default.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, fields
from enum import Enum
from typing import Any, Callable, Mapping

from streaming.log.config import LONG_MAX, LogConfig
from streaming.errors import UserError

log = logging.getLogger(__name__)


class ConfigError(UserError, ValueError):
    """An invalid compaction setting; ``key`` names the setting at fault."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(f"{key}: {message}")
        self.key = key


class Strategy(str, Enum):
    OFFSET = "offset"
    TIMESTAMP = "timestamp"
    HEADER = "header"


class KeylessPolicy(str, Enum):
    FAIL = "fail"              # stop cleaning the partition with an error naming partition and offset
    DROP = "drop"              # Kafka's cleaner behaviour: remove, count, log
    DEAD_LETTER = "dead-letter"  # remove from the log and hand back to the caller for a dead-letter topic


@dataclass(frozen=True)
class _Key:
    name: str
    attr: str
    parse: Callable[[str], Any]


def _long(text: str) -> int:
    try:
        return int(text.strip())
    except ValueError:
        raise ValueError("not a whole number") from None


def _ratio(text: str) -> float:
    try:
        return float(text.strip())
    except ValueError:
        raise ValueError("not a number") from None


def _policy(text: str) -> str:
    return ",".join(sorted(p.strip() for p in text.split(",") if p.strip()))


@dataclass(frozen=True)
class CompactionConfig:
    cleanup_policy: str = "compact"
    segment_bytes: int = 1_073_741_824
    segment_ms: int = 604_800_000
    segment_jitter_ms: int = 0
    min_cleanable_dirty_ratio: float = 0.5
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = LONG_MAX
    delete_retention_ms: int = 86_400_000
    compaction_strategy: Strategy = Strategy.OFFSET
    compaction_strategy_header: str | None = None
    keyless_policy: KeylessPolicy = KeylessPolicy.DROP
    dedupe_buffer_size: int = 134_217_728
    io_buffer_load_factor: float = 0.9
    io_max_bytes_per_second: float = float("inf")
    backoff_ms: int = 15_000
    message_timestamp_after_max_ms: int = 3_600_000
    file_delete_delay_ms: int = 60_000

    def __post_init__(self) -> None:
        for attr, enum, key in (("compaction_strategy", Strategy, "compaction.strategy"),
                                ("keyless_policy", KeylessPolicy, "compaction.keyless.policy")):
            try:
                object.__setattr__(self, attr, enum(getattr(self, attr)))
            except ValueError:
                raise ConfigError(key, f"unknown value {getattr(self, attr)!r}; one of "
                                       f"{', '.join(e.value for e in enum)}") from None
        policies = set(self.cleanup_policy.split(","))
        if not policies <= {"compact", "delete"} or "compact" not in policies:
            raise ConfigError("cleanup.policy", f"must be 'compact' or 'compact,delete' for a compactor, "
                                                f"got {self.cleanup_policy!r}")
        for key, value, low in (("segment.bytes", self.segment_bytes, 14),
                                ("segment.ms", self.segment_ms, 1),
                                ("segment.jitter.ms", self.segment_jitter_ms, 0),
                                ("min.compaction.lag.ms", self.min_compaction_lag_ms, 0),
                                ("max.compaction.lag.ms", self.max_compaction_lag_ms, 1),
                                ("delete.retention.ms", self.delete_retention_ms, 0),
                                ("log.cleaner.dedupe.buffer.size", self.dedupe_buffer_size, 48),
                                ("log.cleaner.backoff.ms", self.backoff_ms, 0),
                                ("message.timestamp.after.max.ms", self.message_timestamp_after_max_ms, 0),
                                ("file.delete.delay.ms", self.file_delete_delay_ms, 0)):
            if value < low:
                raise ConfigError(key, f"must be >= {low}, got {value}")
        if not 0.0 <= self.min_cleanable_dirty_ratio <= 1.0:
            raise ConfigError("min.cleanable.dirty.ratio", f"must be in [0, 1], got {self.min_cleanable_dirty_ratio}")
        if not 0.0 < self.io_buffer_load_factor < 1.0:
            raise ConfigError("log.cleaner.io.buffer.load.factor",
                              f"must be in (0, 1), got {self.io_buffer_load_factor}")
        if not self.io_max_bytes_per_second > 0:
            raise ConfigError("log.cleaner.io.max.bytes.per.second", f"must be > 0, got {self.io_max_bytes_per_second}")
        if self.max_compaction_lag_ms < self.min_compaction_lag_ms:
            raise ConfigError("max.compaction.lag.ms", f"({self.max_compaction_lag_ms}) must not be less than "
                                                       f"min.compaction.lag.ms ({self.min_compaction_lag_ms})")
        if self.compaction_strategy is Strategy.HEADER and not self.compaction_strategy_header:
            raise ConfigError("compaction.strategy.header", "must name a header when compaction.strategy=header")
        if self.compaction_strategy is not Strategy.HEADER and self.compaction_strategy_header:
            raise ConfigError("compaction.strategy.header",
                              f"is only used with compaction.strategy=header (strategy is "
                              f"{self.compaction_strategy.value})")

    # ----- parsing -----------------------------------------------------------------------------------------

    @classmethod
    def from_mapping(cls, values: Mapping[str, str], base: "CompactionConfig | None" = None) -> "CompactionConfig":
        """Build from Kafka-named settings over ``base``; an unknown key is an error naming it."""
        current = {f.name: getattr(base or cls(), f.name) for f in fields(cls)}
        for name, text in values.items():
            key = KEYS.get(name.strip())
            if key is None:
                raise ConfigError(name, f"unknown setting; known: {', '.join(sorted(KEYS))}")
            try:
                current[key.attr] = key.parse(text)
            except ValueError as exc:
                raise ConfigError(key.name, f"invalid value {text!r} ({exc})") from None
        return cls(**current)

    def to_kafka(self) -> dict[str, str]:
        """The effective settings under Kafka's names, as printed at start-up."""
        out = {}
        for key in KEYS.values():
            value = getattr(self, key.attr)
            out[key.name] = value.value if isinstance(value, Enum) else ("" if value is None else str(value))
        return out

    @property
    def log_config(self) -> LogConfig:
        return LogConfig(segment_bytes=self.segment_bytes, segment_ms=self.segment_ms,
                         segment_jitter_ms=self.segment_jitter_ms, max_compaction_lag_ms=self.max_compaction_lag_ms,
                         timestamp_after_max_ms=self.message_timestamp_after_max_ms,
                         file_delete_delay_ms=self.file_delete_delay_ms)


KEYS: dict[str, _Key] = {k.name: k for k in (
    _Key("cleanup.policy", "cleanup_policy", _policy),
    _Key("segment.bytes", "segment_bytes", _long),
    _Key("segment.ms", "segment_ms", _long),
    _Key("segment.jitter.ms", "segment_jitter_ms", _long),
    _Key("min.cleanable.dirty.ratio", "min_cleanable_dirty_ratio", _ratio),
    _Key("min.compaction.lag.ms", "min_compaction_lag_ms", _long),
    _Key("max.compaction.lag.ms", "max_compaction_lag_ms", _long),
    _Key("delete.retention.ms", "delete_retention_ms", _long),
    _Key("compaction.strategy", "compaction_strategy", lambda t: t.strip().lower()),
    _Key("compaction.strategy.header", "compaction_strategy_header", lambda t: t.strip() or None),
    _Key("compaction.keyless.policy", "keyless_policy", lambda t: t.strip().lower()),
    _Key("log.cleaner.dedupe.buffer.size", "dedupe_buffer_size", _long),
    _Key("log.cleaner.io.buffer.load.factor", "io_buffer_load_factor", _ratio),
    _Key("log.cleaner.io.max.bytes.per.second", "io_max_bytes_per_second", _ratio),
    _Key("log.cleaner.backoff.ms", "backoff_ms", _long),
    _Key("message.timestamp.after.max.ms", "message_timestamp_after_max_ms", _long),
    _Key("file.delete.delay.ms", "file_delete_delay_ms", _long),
)}

# Settings a Kafka topic can carry; the others are the compactor's own (command line only).
KEYS_SET_BY_TOPIC = frozenset({"cleanup.policy", "segment.bytes", "segment.ms", "segment.jitter.ms",
                               "min.cleanable.dirty.ratio", "min.compaction.lag.ms", "max.compaction.lag.ms",
                               "delete.retention.ms", "compaction.strategy", "compaction.strategy.header",
                               "message.timestamp.after.max.ms", "file.delete.delay.ms"})
