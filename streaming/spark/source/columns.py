"""Spark's Kafka columns, and the buffers one partition's records fill before they become an Arrow batch."""

from __future__ import annotations

import bisect
import itertools

import numpy as np
import pyarrow as pa
from confluent_kafka import Message

from streaming.table.kafka_columns import HEADERS_TYPE, no_headers

SCHEMA_DDL = ("key binary, value binary, topic string, partition int, offset long, timestamp timestamp, "
              "timestampType int, headers array<struct<key:string,value:binary>>")
ARROW_SCHEMA = pa.schema([("key", pa.binary()), ("value", pa.binary()), ("topic", pa.string()),
                          ("partition", pa.int32()), ("offset", pa.int64()),
                          ("timestamp", pa.timestamp("us", tz="UTC")), ("timestampType", pa.int32()),
                          ("headers", HEADERS_TYPE)])
# confluent-kafka's timestamp types (0 none, 1 create, 2 log append) -> Kafka's TimestampType ids, which
# Spark's timestampType column holds
_TIMESTAMP_TYPE_IDS = np.array([-1, 0, 1], dtype=np.int32)


class Columns:
    """Column buffers for one partition's records, filled a consume() result at a time and turned into an
    Arrow batch in one go: per message, only Message's own accessors run, mapped in C."""

    def __init__(self, topic: str, partition: int) -> None:
        self.topic, self.partition = topic, partition
        self._reset()

    def _reset(self) -> None:
        self.keys: list = []
        self.values: list = []
        self.offsets: list = []
        self.timestamps: list = []
        self.headers: list = []

    def __len__(self) -> int:
        return len(self.offsets)

    def add(self, msgs: list, position: int, end: int) -> int:
        """Take the messages (none with an error) from ``position`` up to ``end``; returns the new read position.
        Messages below the position are ones taken already, delivered again after a broker came back: the log
        would hold them twice, and a key's two copies at one offset would both be its winner."""
        offsets = list(map(Message.offset, msgs))
        if offsets and offsets[0] < position:
            first = bisect.bisect_left(offsets, position)
            msgs, offsets = msgs[first:], offsets[first:]
        stop = bisect.bisect_left(offsets, end)
        if stop < len(msgs):  # a message at or past the end: the range is read
            msgs, offsets = msgs[:stop], offsets[:stop]
            position = end
        elif offsets:
            position = offsets[-1] + 1
        self.offsets += offsets
        self.keys += map(Message.key, msgs)
        self.values += map(Message.value, msgs)
        self.timestamps += map(Message.timestamp, msgs)
        self.headers += map(Message.headers, msgs)
        return position

    def take(self) -> pa.RecordBatch:
        n = len(self.offsets)
        # the (type, ms) pairs flattened in one pass, faster than np.array over the tuples (bench/README.md)
        stamps = np.fromiter(itertools.chain.from_iterable(self.timestamps), dtype=np.int64, count=2 * n).reshape(n, 2)
        kinds, millis = stamps[:, 0], stamps[:, 1]
        types = _TIMESTAMP_TYPE_IDS[kinds]
        headers = no_headers(n) if not any(self.headers) else pa.array([h or [] for h in self.headers], HEADERS_TYPE)
        batch = pa.RecordBatch.from_arrays([
            pa.array(self.keys, pa.binary()), pa.array(self.values, pa.binary()),
            pa.repeat(pa.scalar(self.topic, pa.string()), n), pa.array(np.full(n, self.partition, dtype=np.int32)),
            pa.array(self.offsets, pa.int64()),
            pa.array(millis * 1000).cast(ARROW_SCHEMA.field("timestamp").type),
            pa.array(types), headers], schema=ARROW_SCHEMA)
        self._reset()
        return batch
