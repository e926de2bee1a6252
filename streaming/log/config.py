"""The log's roll and retention settings: the table's (streaming.settings) defaults and limits."""

from __future__ import annotations

from dataclasses import dataclass, fields

from streaming.settings import SETTINGS, setting_field as _setting


@dataclass(frozen=True)
class LogConfig:
    segment_bytes: int = _setting("segment.bytes")
    segment_ms: int = _setting("segment.ms")
    segment_jitter_ms: int = _setting("segment.jitter.ms")
    max_compaction_lag_ms: int = _setting("max.compaction.lag.ms")
    timestamp_after_max_ms: int = _setting("message.timestamp.after.max.ms")  # see columns.lag_timestamps
    file_delete_delay_ms: int = _setting("file.delete.delay.ms")  # how long an object no manifest needs is kept
    fsync: bool = True  # make every append durable before it returns

    def __post_init__(self) -> None:
        for f in fields(self):
            name = f.metadata.get("setting")
            if name is None:
                continue
            value = getattr(self, f.name)
            problem = f"must be a whole number, got {value!r}" if not isinstance(value, int) else \
                SETTINGS[name].problem(value)
            if problem:
                raise ValueError(f"{name}: {problem}")

    @property
    def roll_ms(self) -> int:
        """Kafka rolls compacted logs at min(segment.ms, max.compaction.lag.ms)."""
        return min(self.segment_ms, self.max_compaction_lag_ms)
