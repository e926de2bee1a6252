"""Spark's edge: a Kafka streaming source on the Python Data Source API."""

from streaming.source.kafka_source import SCHEMA_DDL, SOURCE_NAME, DataLossError, KafkaDataSource
from streaming.source.options import KafkaSourceOptions, SourceOptionError

__all__ = ["DataLossError", "KafkaDataSource", "KafkaSourceOptions", "SCHEMA_DDL", "SOURCE_NAME",
           "SourceOptionError"]
