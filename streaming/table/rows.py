"""A table row per live key, in the columns and types of Spark's Kafka source, so a query written against
the topic reads the table unchanged."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from streaming.log.columns import NO_HEADERS, header_lists
from streaming.table.kafka_columns import HEADERS_TYPE, no_headers

TABLE_SCHEMA = pa.schema([("topic", pa.string()), ("partition", pa.int32()), ("offset", pa.int64()),
                          ("timestamp", pa.timestamp("us", tz="UTC")), ("key", pa.binary()), ("value", pa.binary()),
                          ("headers", HEADERS_TYPE)])


def table_schema(value: pa.DataType) -> pa.Schema:
    """TABLE_SCHEMA with the value column in another type (see values)."""
    return TABLE_SCHEMA.set(TABLE_SCHEMA.get_field_index("value"), pa.field("value", value))


SPARK_DDL = ("topic string, partition int, offset long, timestamp timestamp, key binary, value binary, "
             "headers array<struct<key:string,value:binary>>")


def table_rows(batch: pa.RecordBatch, topic: str, partition: int) -> pa.RecordBatch:
    """A batch of LOG_BATCH_SCHEMA as rows of TABLE_SCHEMA."""
    n = batch.num_rows
    encoded = batch.column("headers")
    if pc.all(pc.equal(encoded, NO_HEADERS)).as_py() is not False:
        headers = no_headers(n)
    else:
        headers = pa.array([[{"key": k, "value": v} for k, v in pairs] for pairs in header_lists(encoded)],
                           HEADERS_TYPE)
    millis = batch.column("timestamp").cast(pa.int64())
    return pa.RecordBatch.from_arrays([
        pa.array([topic] * n, pa.string()), pa.array([partition] * n, pa.int32()), batch.column("offset"),
        pc.multiply(millis, 1000).cast(pa.timestamp("us", tz="UTC")), batch.column("key"),
        batch.column("value"), headers], schema=TABLE_SCHEMA)
