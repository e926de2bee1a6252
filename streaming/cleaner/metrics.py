"""The cleaner's metrics under Kafka's names (kafka.log:type=LogCleaner / LogCleanerManager)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from streaming.cleaner.cleaner import CleanResult
from streaming.cleaner.partition_state import PartitionCleanerState
from streaming.cleaner.selection import LogToClean


@dataclass(frozen=True)
class PartitionOutcome:
    """One partition's turn in a cleaning round: what selection saw, and what the pass did, if it ran."""

    target: LogToClean
    state: PartitionCleanerState
    result: CleanResult | None = None
    error: str | None = None
    skipped_backoff: bool = False


@dataclass(frozen=True)
class CleanerMetrics:
    max_dirty_percent: float = 0.0
    max_compaction_delay_secs: float = 0.0
    max_clean_time_secs: float = 0.0
    cleaner_recopy_percent: float = 0.0
    max_buffer_utilization_percent: float = 0.0
    uncleanable_partitions_count: int = 0
    uncleanable_bytes: int = 0
    time_since_last_run_ms: int = 0
    keyless_records: int = 0
    dead_letter_records: int = 0
    invalid_version_headers: int = 0

    @classmethod
    def of(cls, outcomes: Sequence[PartitionOutcome], now_ms: int, last_run_ms: int | None) -> "CleanerMetrics":
        results = [o.result for o in outcomes if o.result is not None]
        read = sum(r.bytes_read for r in results)
        uncleanable = [o for o in outcomes if o.state.uncleanable]
        return cls(
            max_dirty_percent=max((100 * o.target.cleanable_ratio for o in outcomes), default=0.0),
            max_compaction_delay_secs=max((o.target.compaction_delay_ms / 1000 for o in outcomes), default=0.0),
            max_clean_time_secs=max((r.elapsed_s for r in results), default=0.0),
            cleaner_recopy_percent=100 * sum(r.bytes_written for r in results) / read if read else 0.0,
            max_buffer_utilization_percent=max((100 * r.buffer_utilization for r in results), default=0.0),
            uncleanable_partitions_count=len(uncleanable),
            uncleanable_bytes=sum(o.target.cleanable_bytes for o in uncleanable),
            time_since_last_run_ms=now_ms - last_run_ms if last_run_ms is not None else 0,
            keyless_records=sum(o.state.keyless_records for o in outcomes),
            dead_letter_records=sum(o.state.dead_letter_records for o in outcomes),
            invalid_version_headers=sum(o.state.invalid_version_headers for o in outcomes),
        )

    def to_kafka(self) -> dict[str, float | int]:
        """Metric name -> value, with Kafka's metric names (dashes) and the project's additions."""
        return {name.replace("_", "-"): getattr(self, name) for name in self.__dataclass_fields__}
