"""The cleaner's metrics under Kafka's names (kafka.log:type=LogCleaner / LogCleanerManager)."""

from __future__ import annotations

from dataclasses import dataclass, fields
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
    skipped_backoff: bool = False


@dataclass(frozen=True)
class PartitionFigures:
    """One partition's share of the cleaner's metrics.

    It comes from a manager round, from a Spark task's stage report, or from the files on disk (status);
    the metrics themselves are computed from it in one place, CleanerMetrics.of.
    """

    cleanable_ratio: float
    compaction_delay_ms: int
    cleanable_bytes: int
    uncleanable: bool
    keyless_records: int = 0          # counters: totals kept in the partition's cleaner state
    dead_letter_records: int = 0
    invalid_version_headers: int = 0
    passes: int = 0                   # pass figures: what this turn's passes did
    clean_secs: float = 0.0
    bytes_read: int = 0
    bytes_written: int = 0
    buffer_utilization: float = 0.0

    @classmethod
    def of_outcome(cls, o: PartitionOutcome) -> "PartitionFigures":
        r = o.result
        return cls(o.target.cleanable_ratio, o.target.compaction_delay_ms, o.target.cleanable_bytes,
                   o.state.uncleanable, o.state.keyless_records, o.state.dead_letter_records,
                   o.state.invalid_version_headers, passes=int(r is not None),
                   clean_secs=r.elapsed_s if r else 0.0, bytes_read=r.bytes_read if r else 0,
                   bytes_written=r.bytes_written if r else 0, buffer_utilization=r.buffer_utilization if r else 0.0)

    @classmethod
    def of_mapping(cls, m: Mapping[str, object]) -> "PartitionFigures":
        """From a dict carrying these names (a stage report that came back from an executor)."""
        return cls(**{f.name: m[f.name] for f in fields(cls)})


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
