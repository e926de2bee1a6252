"""The log's roll and retention settings: a projection of the compaction config onto what a partition log
reads. The values were checked where they were parsed (the settings table, through CompactionConfig), so the
log takes them as given; its defaults are the table's, for a log opened on its own."""

from __future__ import annotations

from dataclasses import dataclass

from streaming.configuration.settings import setting_field as _setting


@dataclass(frozen=True)
class LogConfig:
    segment_bytes: int = _setting("segment.bytes")
    segment_ms: int = _setting("segment.ms")
    segment_jitter_ms: int = _setting("segment.jitter.ms")
    max_compaction_lag_ms: int = _setting("max.compaction.lag.ms")
    message_timestamp_after_max_ms: int = _setting("message.timestamp.after.max.ms")  # see columns.lag_timestamps
    file_delete_delay_ms: int = _setting("file.delete.delay.ms")  # how long an object no manifest needs is kept
    fsync: bool = True  # make every write durable: as it returns, or at the crossing of its task's barrier

    @property
    def roll_ms(self) -> int:
        """Kafka rolls compacted logs at min(segment.ms, max.compaction.lag.ms)."""
        return min(self.segment_ms, self.max_compaction_lag_ms)
