"""Spark's Kafka columns, and the buffers one partition's records fill before they become an Arrow batch."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from streaming.kafka.source.fetched import Fetched, Run
from streaming.table.kafka_columns import HEADERS_TYPE, no_headers

SCHEMA_DDL = ("key binary, value binary, topic string, partition int, offset long, timestamp timestamp, "
              "timestampType int, headers array<struct<key:string,value:binary>>")
ARROW_SCHEMA = pa.schema([("key", pa.binary()), ("value", pa.binary()), ("topic", pa.string()),
                          ("partition", pa.int32()), ("offset", pa.int64()),
                          ("timestamp", pa.timestamp("us", tz="UTC")), ("timestampType", pa.int32()),
                          ("headers", HEADERS_TYPE)])
# librdkafka's timestamp types (0 none, 1 create, 2 log append) -> Kafka's TimestampType ids, which
# Spark's timestampType column holds
_TIMESTAMP_TYPE_IDS = np.array([-1, 0, 1], dtype=np.int32)


def _header_lists(fetched: Fetched) -> pa.Array:
    """The fetched batch's headers as Spark's headers column, over the fetched buffers (no copy)."""
    h = fetched.headers
    items = pa.StructArray.from_arrays([h.names, h.values], fields=list(HEADERS_TYPE.value_type))
    return pa.Array.from_buffers(HEADERS_TYPE, len(fetched), [None, h.lists], children=[items])


class Columns:
    """One partition's records as Arrow batches of Spark's Kafka columns: each fetched run, cut to the range
    being read, becomes a batch of slices of the fetched columns (no copy)."""

    def __init__(self, topic: str, partition: int) -> None:
        self.topic, self.partition = topic, partition
        self._topic = pa.scalar(topic, pa.string())
        self._batches: list[pa.RecordBatch] = []
        self._rows = 0

    def __len__(self) -> int:
        return self._rows

    def add(self, fetched: Fetched, run: Run, position: int, end: int) -> int:
        """Take the run's records from ``position`` up to ``end``; returns the new read position. Records below
        the position are ones taken already, delivered again after a broker came back: the log would hold them
        twice, and a key's two copies at one offset would both be its winner."""
        offsets = fetched.offsets[run.start:run.stop]
        first = run.start + int(np.searchsorted(offsets, position))
        stop = run.start + int(np.searchsorted(offsets, end))
        if stop < run.stop:  # a record at or past the end: the range is read
            position = end
        elif stop > first:
            position = int(fetched.offsets[stop - 1]) + 1
        if stop > first:
            self._batches.append(self._batch(fetched, first, stop))
            self._rows += stop - first
        return position

    def _batch(self, fetched: Fetched, first: int, stop: int) -> pa.RecordBatch:
        n = stop - first
        millis = fetched.timestamps[first:stop]
        headers = no_headers(n) if fetched.headers is None else _header_lists(fetched).slice(first, n)
        return pa.RecordBatch.from_arrays([
            fetched.keys.slice(first, n), fetched.values.slice(first, n), pa.repeat(self._topic, n),
            pa.array(np.full(n, self.partition, dtype=np.int32)), pa.array(fetched.offsets[first:stop]),
            pa.array(millis * 1000).cast(ARROW_SCHEMA.field("timestamp").type),
            pa.array(_TIMESTAMP_TYPE_IDS[fetched.timestamp_types[first:stop]]), headers], schema=ARROW_SCHEMA)

    def take(self) -> list[pa.RecordBatch]:
        batches, self._batches, self._rows = self._batches, [], 0
        return batches
