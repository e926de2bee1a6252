"""A consumer's records in batches of Arrow columns, with no Python object per record.

confluent-kafka hands out a ``Message`` (and a bytes object for each key and value) per record, which cost
more CPU than librdkafka's whole fetch (bench/bench_task.py). The C extension ``_rdkafka_columns`` takes the
fetched records off the same librdkafka handle and copies them once into column buffers, which become
Arrow arrays here without another copy. The consumer itself stays confluent-kafka's: its settings, its log,
assign, pause, positions and offset lookups are all as before.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

import numpy as np
import pyarrow as pa
from confluent_kafka import Consumer, KafkaError, TopicPartition

from streaming.kafka import librdkafka_build

# Keys, values and headers of one fetched batch stay under this, so its Arrow binary columns keep 32-bit
# offsets (Spark's binary type); the records past it come in the next batch.
MAX_BATCH_BYTES = 1 << 30


@dataclass(frozen=True)
class Run:
    """Records [start, stop) of a fetched batch, all of one partition, in offset order."""

    topic: str
    partition: int
    start: int
    stop: int


@dataclass(frozen=True)
class FetchError:
    """An error librdkafka put in the partition's queue, where its records would be."""

    topic: str | None
    partition: int
    error: KafkaError


@dataclass(frozen=True)
class Headers:
    """A fetched batch's headers, flat: record i's are names[lists[i]:lists[i + 1]] and values likewise."""

    lists: pa.Buffer  # int32 offsets, one more than the records
    names: pa.Array  # string
    values: pa.Array  # binary, null where a header has no value


@dataclass(frozen=True)
class Fetched:
    """One fetched batch: its records' columns, and runs and errors in the order they came."""

    events: tuple[Run | FetchError, ...]
    offsets: np.ndarray
    timestamps: np.ndarray  # ms, as librdkafka gives them (-1: none)
    timestamp_types: np.ndarray  # librdkafka's rd_kafka_timestamp_type_t: 0 none, 1 create, 2 log append
    keys: pa.Array
    values: pa.Array
    headers: Headers | None  # None when no record of the batch has any

    def __len__(self) -> int:
        return len(self.offsets)


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


def _events(count: int, found: list[tuple]) -> Iterator[Run | FetchError]:
    """A run ends where the next event starts (a run of another partition, or an error)."""
    stops = [event[0] for event in found[1:]] + [count]
    for event, stop in zip(found, stops, strict=True):
        if len(event) == 3:
            yield Run(event[1], event[2], event[0], stop)
        else:
            yield _error(event)


def _error(found: tuple) -> FetchError:
    _, topic, partition, code, text = found
    return FetchError(topic, partition, KafkaError(code, text))


class BatchFetch:
    """The fetched records of the partitions forwarded to it, read off ``consumer``'s handle. Close it before
    the consumer."""

    def __init__(self, consumer: Consumer, client_id: str, capacity: int) -> None:
        address = librdkafka_build.handle(consumer, librdkafka_build.CONSUMER, client_id)
        self._consumer = consumer  # the handle lives as long as the consumer object
        self._fetcher = librdkafka_build.columns().Fetcher(address, capacity)
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
        none came."""
        for topic, partition in self._restarting:
            self._fetcher.forward(topic, partition)
        got = self._fetcher.fetch(max_records, int(timeout_s * 1000), MAX_BATCH_BYTES)
        if got is None:
            return None
        n, events, cols = got
        self._restarting.difference_update((event[1], event[2]) for event in events)
        (offsets, stamps, kinds, key_bits, key_offsets, keys, value_bits, value_offsets, values, *headers) = cols
        return Fetched(tuple(_events(n, events)), np.frombuffer(offsets, np.int64),
                       np.frombuffer(stamps, np.int64), np.frombuffer(kinds, np.int8),
                       _binary(pa.binary(), n, key_bits, key_offsets, keys),
                       _binary(pa.binary(), n, value_bits, value_offsets, values), _headers(*headers))

    def close(self) -> None:
        self._fetcher.close()
