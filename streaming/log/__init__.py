"""The segmented append log: plain Python, numpy and Arrow, no Spark or Kafka imports."""

from streaming.log.columns import (LOG_BATCH_SCHEMA, batch_from_records, encode_headers, decode_headers,
                                   record_size, records_from_batch)
from streaming.log.config import LogConfig
from streaming.log.manifest import LogFencedError
from streaming.log.partition_log import PartitionLog
from streaming.log.reports import AppendResult, RecoveryReport
from streaming.log.record import CREATE_TIME, LOG_APPEND_TIME, BadRecordError, Header, LogRecord, make_record
from streaming.log.segment import CorruptSegmentError, SegmentMeta
from streaming.log.arrow_storage import ArrowStorage
from streaming.log.storage import LocalStorage, Storage

__all__ = ["AppendResult", "ArrowStorage", "BadRecordError", "CREATE_TIME", "CorruptSegmentError", "Header",
           "LOG_APPEND_TIME", "LOG_BATCH_SCHEMA", "LocalStorage", "LogFencedError", "LogConfig", "LogRecord", "PartitionLog",
           "RecoveryReport", "SegmentMeta", "Storage", "batch_from_records", "decode_headers", "encode_headers",
           "make_record", "record_size", "records_from_batch"]
