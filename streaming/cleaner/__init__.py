"""The cleaner: Kafka's compaction rules plus KIP-280 strategies, in plain Python and numpy."""

from streaming.cleaner.cleaner import Cleaner, CleanResult, KeylessRecordError
from streaming.cleaner.config import KEYS_SET_BY_TOPIC, CompactionConfig, ConfigError, JobSettings, KeylessPolicy, Overrides, Strategy
from streaming.cleaner.manager import LogCleanerManager
from streaming.cleaner.metrics import CleanerMetrics, PartitionFigures, PartitionOutcome
from streaming.cleaner.offset_map import OffsetMap
from streaming.cleaner.partition_state import PartitionCleanerState
from streaming.cleaner.selection import LogToClean, NextClean, log_to_clean, next_clean, quiet_until

__all__ = ["KEYS_SET_BY_TOPIC", "CleanResult", "Cleaner", "CleanerMetrics", "LogCleanerManager", "NextClean", "next_clean", "PartitionCleanerState", "PartitionFigures", "PartitionOutcome", "CompactionConfig", "ConfigError", "JobSettings", "Overrides", "KeylessPolicy", "KeylessRecordError",
           "LogToClean", "OffsetMap", "Strategy", "log_to_clean", "quiet_until"]
