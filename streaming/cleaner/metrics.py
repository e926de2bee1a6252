"""The cleaner's metrics under Kafka's names (kafka.log:type=LogCleaner / LogCleanerManager)."""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Mapping, Sequence

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
    cause: Exception | None = None  # what made the pass fail, for callers that act on its kind
    skipped_backoff: bool = False


@dataclass(frozen=True)
class PartitionFigures:
    """One partition's share of the cleaner's metrics.

    It comes from a manager round, from a Spark task's stage report, or from the files on disk (status);
    the metrics themselves are computed from it in one place, CleanerMetrics.of.
    """

    cleanable_ratio: float = 0.0      # selection's view now
    compaction_delay_ms: int = 0
    cleanable_bytes: int = 0
    uncleanable: bool = False
    keyless_records: int = 0          # counters: totals kept in the partition's cleaner state
    dead_letter_records: int = 0
    invalid_version_headers: int = 0
    passes: int = 0                   # pass figures: what this turn's passes did
    clean_secs: float = 0.0
    bytes_read: int = 0
    bytes_written: int = 0
    buffer_utilization: float = 0.0

    def observed(self, target: LogToClean, state: PartitionCleanerState,
                 uncleanable: bool | None = None) -> "PartitionFigures":
        """These figures with what selection and the partition's cleaner state say now."""
        return replace(self, cleanable_ratio=target.cleanable_ratio, compaction_delay_ms=target.compaction_delay_ms,
                       cleanable_bytes=target.cleanable_bytes,
                       uncleanable=state.uncleanable if uncleanable is None else uncleanable,
                       keyless_records=state.keyless_records, dead_letter_records=state.dead_letter_records,
                       invalid_version_headers=state.invalid_version_headers)

    def with_pass(self, r: CleanResult) -> "PartitionFigures":
        """These figures with one more pass: its time and buffer use are maxima, its bytes are added."""
        return replace(self, passes=self.passes + 1, clean_secs=max(self.clean_secs, r.elapsed_s),
                       bytes_read=self.bytes_read + r.bytes_read, bytes_written=self.bytes_written + r.bytes_written,
                       buffer_utilization=max(self.buffer_utilization, r.buffer_utilization))


PASS_GAUGES = ("max_clean_time_secs", "cleaner_recopy_percent", "max_buffer_utilization_percent")


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
    def of(cls, figures: Sequence[PartitionFigures], now_ms: int, last_run_ms: int | None,
           previous: "CleanerMetrics | None" = None) -> "CleanerMetrics":
        """The gauges now. Like Kafka's LogCleaner gauges, the pass figures describe the last turn that
        cleaned something: a turn without passes keeps ``previous``'s."""
        cleaned = [f for f in figures if f.passes]
        if cleaned:
            read = sum(f.bytes_read for f in cleaned)
            passes = {"max_clean_time_secs": max(f.clean_secs for f in cleaned),
                      "cleaner_recopy_percent": 100 * sum(f.bytes_written for f in cleaned) / read if read else 0.0,
                      "max_buffer_utilization_percent": max(100 * f.buffer_utilization for f in cleaned)}
        else:
            passes = {g: getattr(previous, g) for g in PASS_GAUGES} if previous else {}
        uncleanable = [f for f in figures if f.uncleanable]
        return cls(
            **passes,
            max_dirty_percent=max((100 * f.cleanable_ratio for f in figures), default=0.0),
            max_compaction_delay_secs=max((f.compaction_delay_ms / 1000 for f in figures), default=0.0),
            uncleanable_partitions_count=len(uncleanable),
            uncleanable_bytes=sum(f.cleanable_bytes for f in uncleanable),
            time_since_last_run_ms=now_ms - last_run_ms if last_run_ms is not None else 0,
            keyless_records=sum(f.keyless_records for f in figures),
            dead_letter_records=sum(f.dead_letter_records for f in figures),
            invalid_version_headers=sum(f.invalid_version_headers for f in figures))

    def to_kafka(self) -> dict[str, float | int]:
        """Metric name -> value, with Kafka's metric names (dashes) and the project's additions."""
        return {f.name.replace("_", "-"): getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_kafka(cls, values: Mapping[str, float | int]) -> "CleanerMetrics":
        return cls(**{f.name: values[f.name.replace("_", "-")] for f in fields(cls)
                      if f.name.replace("_", "-") in values})
