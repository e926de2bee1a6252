"""A table row per live key, in the columns and types of Spark's Kafka source, so a query written against
the topic reads the table unchanged."""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from streaming.log.columns import NO_HEADERS, header_lists
from streaming.table.kafka_columns import HEADERS_TYPE, no_headers

TABLE_SCHEMA = pa.schema([("topic", pa.string()), ("partition", pa.int32()), ("offset", pa.int64()),
                          ("timestamp", pa.timestamp("us", tz="UTC")), ("key", pa.binary()), ("value", pa.binary()),
                          ("headers", HEADERS_TYPE)])


@dataclass(frozen=True)
class Coordinates:
    """The names of the columns that place a row: where it came from, its key and its offset there."""

    topic: str
    partition: str
    offset: str
    timestamp: str
    key: str


KAFKA_COLUMNS = Coordinates("topic", "partition", "offset", "timestamp", "key")
# a change stream's table: the database's columns, and these, named as Debezium names the fields it adds
CHANGE_COLUMNS = Coordinates("__topic", "__partition", "__offset", "__timestamp", "__key")


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


def change_rows(batch: pa.RecordBatch, columns: pa.Table) -> pa.RecordBatch:
    """Rows of TABLE_SCHEMA (the winners) as a change stream's table rows: the placing columns, then the
    database's ``columns`` of each row."""
    kafka = [batch.column(getattr(KAFKA_COLUMNS, n)) for n in vars(KAFKA_COLUMNS)]
    placing = [pa.field(name, a.type) for name, a in zip(vars(CHANGE_COLUMNS).values(), kafka, strict=True)]
    return pa.RecordBatch.from_arrays(kafka + [c.combine_chunks() for c in columns.columns],
                                      schema=pa.schema(placing + list(columns.schema)))  # a column's default with it
