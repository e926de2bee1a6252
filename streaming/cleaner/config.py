"""Compaction settings under Kafka's own names, with Kafka's defaults, parsed from ``key=value`` strings.

Every value is checked before anything runs, and every error names the offending key, because these come
from command lines and topic configs where a typo must not silently fall back to a default.
"""

from __future__ import annotations

import difflib
import logging
from dataclasses import dataclass, field, fields, replace
from enum import Enum
from typing import Any, Mapping

from streaming.errors import UserError
from streaming.log.config import LogConfig
from streaming.erasure.events import AuditKeys
from streaming.configuration.settings import SETTINGS, Scope, setting_field as _setting

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
class CompactionConfig:
    cleanup_policy: str = _setting("cleanup.policy")
    segment_bytes: int = _setting("segment.bytes")
    segment_ms: int = _setting("segment.ms")
    segment_jitter_ms: int = _setting("segment.jitter.ms")
    min_cleanable_dirty_ratio: float = _setting("min.cleanable.dirty.ratio")
    min_compaction_lag_ms: int = _setting("min.compaction.lag.ms")
    max_compaction_lag_ms: int = _setting("max.compaction.lag.ms")
    delete_retention_ms: int = _setting("delete.retention.ms")
    compaction_strategy: Strategy = _setting("compaction.strategy")
    compaction_strategy_header: str | None = _setting("compaction.strategy.header")
    keyless_policy: KeylessPolicy = _setting("compaction.keyless.policy")
    erase_audit_keys: AuditKeys = _setting("erase.audit.keys")
    emit_transaction_records: int = _setting("emit.transaction.records")
    emit_transaction_ms: int = _setting("emit.transaction.ms")
    dedupe_buffer_size: int = _setting("log.cleaner.dedupe.buffer.size")
    io_buffer_load_factor: float = _setting("log.cleaner.io.buffer.load.factor")
    io_max_bytes_per_second: float = _setting("log.cleaner.io.max.bytes.per.second")
    backoff_ms: int = _setting("log.cleaner.backoff.ms")
    message_timestamp_after_max_ms: int = _setting("message.timestamp.after.max.ms")
    file_delete_delay_ms: int = _setting("file.delete.delay.ms")

    def __post_init__(self) -> None:
        for attr, name in _ATTRS.items():
            value = getattr(self, attr)
            problem = SETTINGS[name].problem(value.value if isinstance(value, Enum) else value)
            if problem:
                raise ConfigError(name, problem)
        object.__setattr__(self, "compaction_strategy", Strategy(self.compaction_strategy))
        object.__setattr__(self, "keyless_policy", KeylessPolicy(self.keyless_policy))
        object.__setattr__(self, "erase_audit_keys", AuditKeys(self.erase_audit_keys))
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
        return replace(base or cls(), **_parse(values))

    def to_kafka(self, scopes: frozenset[Scope] = frozenset(Scope)) -> dict[str, str]:
        """The effective settings under Kafka's names, of the scopes asked for: what the saved spec holds and
        start-up prints (a topic's own, its job's once)."""
        return {name: SETTINGS[name].render(getattr(self, attr)) for attr, name in _ATTRS.items()
                if SETTINGS[name].scope in scopes}

    @property
    def longest_hold_ms(self) -> int:
        """How long a record may wait before a cleaning pass can cover it (and so before it can reach the sink),
        when traffic is too thin to fill segment.bytes: its active segment rolls at segment.ms, or once its
        first record is max.compaction.lag.ms old (KIP-354), and min.compaction.lag.ms holds it at least that
        long. Kafka's defaults make this a week."""
        return max(self.min_compaction_lag_ms, min(self.segment_ms, self.max_compaction_lag_ms))

    def drained(self) -> "CompactionConfig":
        """For a drain (--once --drain): every partition with anything cleanable is cleaned, however little of
        its log is dirty; min.compaction.lag.ms still holds records back."""
        return replace(self, min_cleanable_dirty_ratio=0.0)

    @property
    def log_config(self) -> LogConfig:
        """The part the partition log reads, under the same field names (LogConfig's fields are a subset)."""
        return LogConfig(**{f.name: getattr(self, f.name) for f in fields(LogConfig) if f.name in _ATTRS})


_ATTRS = {f.name: f.metadata["setting"] for f in fields(CompactionConfig)}  # field -> setting name
_FIELDS = {name: attr for attr, name in _ATTRS.items()}


def _parse(values: Mapping[str, str]) -> dict[str, Any]:
    """Kafka-named settings as CompactionConfig's typed fields; an unknown key or bad text names the key."""
    out = {}
    for name, text in values.items():
        setting = SETTINGS.get(name.strip())
        if setting is None:
            nearest = difflib.get_close_matches(name.strip(), SETTINGS, n=1)
            hint = f"did you mean {nearest[0]}?" if nearest else f"known: {', '.join(sorted(SETTINGS))}"
            raise ConfigError(name, f"unknown setting; {hint}")
        try:
            out[_FIELDS[setting.name]] = setting.parse(text)
        except ValueError as exc:
            raise ConfigError(setting.name, f"invalid value {text!r} ({exc})") from None
    return out


@dataclass(frozen=True)
class Overrides:
    """Settings given on the command line: parsed and checked once, at the edge, then laid over each topic's
    own settings (which come from the cluster as text, and are parsed where they are read)."""

    values: Mapping[str, Any] = field(default_factory=dict)  # CompactionConfig field -> typed value

    @classmethod
    def parse(cls, text: Mapping[str, str]) -> "Overrides":
        values = _parse(text)
        CompactionConfig(**values)  # every value and combination is checked now, before anything runs
        return cls(values)

    def over(self, base: CompactionConfig) -> CompactionConfig:
        return replace(base, **self.values)

    @property
    def job(self) -> "JobSettings":
        return JobSettings(**{k: v for k, v in self.values.items() if k in _JOB_FIELDS})


@dataclass(frozen=True)
class JobSettings:
    """The settings that hold for the whole job (Scope.JOB), given once on the command line: one keyless
    policy, one erase audit and one sink transaction size whatever topics the job mirrors. Each topic's
    CompactionConfig carries them for its cleaner, laid over by ``over``; the job reads them here, never from a
    topic."""

    keyless_policy: KeylessPolicy = _setting("compaction.keyless.policy")
    erase_audit_keys: AuditKeys = _setting("erase.audit.keys")
    emit_transaction_records: int = _setting("emit.transaction.records")
    emit_transaction_ms: int = _setting("emit.transaction.ms")

    def __post_init__(self) -> None:
        object.__setattr__(self, "keyless_policy", KeylessPolicy(self.keyless_policy))
        object.__setattr__(self, "erase_audit_keys", AuditKeys(self.erase_audit_keys))

    def over(self, config: CompactionConfig) -> CompactionConfig:
        return replace(config, **{f.name: getattr(self, f.name) for f in fields(self)})

    def to_kafka(self) -> dict[str, str]:
        return self.over(CompactionConfig()).to_kafka(frozenset({Scope.JOB}))

    @classmethod
    def from_kafka(cls, values: Mapping[str, str]) -> "JobSettings":
        return Overrides.parse(values).job

_JOB_FIELDS = frozenset(f.name for f in fields(JobSettings))

# Settings a Kafka topic can carry; the others are the compactor's own (command line only).
KEYS_SET_BY_TOPIC = frozenset(s.name for s in SETTINGS.values() if s.scope is Scope.TOPIC)
