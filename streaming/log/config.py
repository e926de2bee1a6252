"""The log's roll settings, with Kafka's topic-config names in the docstrings and Kafka's defaults."""

from __future__ import annotations

from dataclasses import dataclass

LONG_MAX = 2**63 - 1


@dataclass(frozen=True)
class LogConfig:
    segment_bytes: int = 1_073_741_824        # segment.bytes
    segment_ms: int = 604_800_000             # segment.ms
    segment_jitter_ms: int = 0                # segment.jitter.ms
    max_compaction_lag_ms: int = LONG_MAX     # max.compaction.lag.ms
    fsync: bool = True                        # make every append durable before it returns
    timestamp_after_max_ms: int = 3_600_000   # message.timestamp.after.max.ms (see columns.lag_timestamps)
    file_delete_delay_ms: int = 60_000        # file.delete.delay.ms: how long an object no manifest needs is kept

    def __post_init__(self) -> None:
        for name, value, low in (("segment.bytes", self.segment_bytes, 1), ("segment.ms", self.segment_ms, 1),
                                 ("segment.jitter.ms", self.segment_jitter_ms, 0),
                                 ("max.compaction.lag.ms", self.max_compaction_lag_ms, 1),
                                 ("message.timestamp.after.max.ms", self.timestamp_after_max_ms, 0),
                                 ("file.delete.delay.ms", self.file_delete_delay_ms, 0)):
            if not isinstance(value, int) or value < low:
                raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")

    @property
    def roll_ms(self) -> int:
        """Kafka rolls compacted logs at min(segment.ms, max.compaction.lag.ms)."""
        return min(self.segment_ms, self.max_compaction_lag_ms)
