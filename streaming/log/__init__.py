"""The segmented append log: plain Python and fastavro, no Spark or Kafka imports."""

from streaming.log.config import LogConfig
from streaming.log.partition_log import AppendResult, BadRecordError, PartitionLog, RecoveryReport
from streaming.log.record import CREATE_TIME, LOG_APPEND_TIME, Header, LogRecord, make_record, record_size
from streaming.log.segment import CorruptSegmentError, SegmentMeta
from streaming.log.storage import ArrowStorage, LocalStorage, Storage

__all__ = ["AppendResult", "ArrowStorage", "BadRecordError", "CREATE_TIME", "CorruptSegmentError", "Header",
           "LOG_APPEND_TIME", "LocalStorage", "LogConfig", "LogRecord", "PartitionLog", "RecoveryReport",
           "SegmentMeta", "Storage", "make_record", "record_size"]
