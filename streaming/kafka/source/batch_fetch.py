"""A consumer's records in batches of Arrow columns, with no Python object per record: the native path's fetch.

confluent-kafka hands out a ``Message`` (and a bytes object for each key and value) per record, which cost
more CPU than librdkafka's whole fetch (bench/bench_task.py). The C extension ``_rdkafka_columns`` takes the
fetched records off the same librdkafka handle and copies them once into column buffers, which become
Arrow arrays here without another copy. The consumer itself stays confluent-kafka's: its settings, its log,
assign, pause, positions and offset lookups are all as before.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from confluent_kafka import Consumer, KafkaError, TopicPartition

from streaming.kafka.native import gate
from streaming.kafka.source.fetched import Fetched, Headers, events_of, of_messages

# Keys, values and headers of one fetched batch stay under this, so its Arrow binary columns keep 32-bit
# offsets (Spark's binary type); the records past it come in the next batch.
MAX_BATCH_BYTES = 1 << 30


def _binary(kind: pa.DataType, n: int, bitmap: bytes | None, offsets: bytes, data: bytes) -> pa.Array:
    return pa.Array.from_buffers(kind, n, [None if bitmap is None else pa.py_buffer(bitmap), pa.py_buffer(offsets),
                                           pa.py_buffer(data)])


def _headers(lists: bytes | None, name_offsets: bytes, names: bytes, bitmap: bytes | None, value_offsets: bytes,
             values: bytes) -> Headers | None:
    if lists is None:
        return None
    count = len(name_offsets) // 4 - 1
    return Headers(pa.py_buffer(lists), _binary(pa.string(), count, None, name_offsets, names),
                   _binary(pa.binary(), count, bitmap, value_offsets, values))


def _mark(found: tuple) -> tuple:
    """The C side's event as events_of takes it: an error's code and text as a KafkaError."""
    if len(found) == 3:
        return found
    index, topic, partition, code, text = found
    return index, topic, partition, KafkaError(code, text)


class BatchFetch:
    """The fetched records of the partitions forwarded to it, read off ``consumer``'s handle. Close it before
    the consumer."""

    def __init__(self, consumer: Consumer, client_id: str, capacity: int) -> None:
        gate.check_handle(consumer, gate.CONSUMER, client_id)  # a tested client, and its handle where it is read
        self._consumer = consumer
        self._fetcher = gate.columns().Fetcher(consumer, capacity)
        self._restarting: set[tuple[str, int]] = set()

    def forward(self, topic: str, partition: int) -> None:
        """The partition's records come here, not to ``consume()``. Call it before assign(): once assigned, the
        partition's first records may already be on their way to the consumer's queue."""
        self._fetcher.forward(topic, partition)

    def restart(self, topic: str, partition: int, offset: int) -> None:
        """Fetch the partition again from ``offset``, after librdkafka stopped its fetch (an offset out of
        range with auto.offset.reset=error), which seek() refuses. Re-assigning it stops and starts its
        fetch, and librdkafka drops a partition's forward when it stops it, on its own thread, so before
        or after this call: the forward is made again at each fetch until the partition is heard from."""
        self._consumer.incremental_unassign([TopicPartition(topic, partition)])
        self._consumer.incremental_assign([TopicPartition(topic, partition, offset)])
        self._restarting.add((topic, partition))

    def fetch(self, max_records: int, timeout_s: float) -> Fetched | None:
        """The next records: librdkafka waits until max_records have come or timeout_s has passed; None if
        none came. Records that reached the consumer's own queue come first, through ``consume()``: a partition
        whose fetch started before its forward was made again sent its first records there, and they come
        before any that the forward, made just now, sends here. That queue also brings the consumer's own
        errors, and serving it runs librdkafka's log lines through confluent-kafka's logger."""
        for topic, partition in self._restarting:
            self._fetcher.forward(topic, partition)
        stray = self._consumer.consume(max_records, 0)
        if stray:
            return of_messages(stray)
        got = self._fetcher.fetch(max_records, int(timeout_s * 1000), MAX_BATCH_BYTES)
        if got is None:
            return None
        n, found, cols = got
        self._restarting.difference_update((mark[1], mark[2]) for mark in found)
        (offsets, stamps, kinds, key_bits, key_offsets, keys, value_bits, value_offsets, values, *headers) = cols
        return Fetched(tuple(events_of(n, [_mark(f) for f in found])), np.frombuffer(offsets, np.int64),
                       np.frombuffer(stamps, np.int64), np.frombuffer(kinds, np.int8),
                       _binary(pa.binary(), n, key_bits, key_offsets, keys),
                       _binary(pa.binary(), n, value_bits, value_offsets, values), _headers(*headers))

    def close(self) -> None:
        self._fetcher.close()
