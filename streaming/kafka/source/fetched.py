"""A consumer's fetched records as one batch of Arrow columns, whichever way they were fetched: the native path's
column buffers (streaming.kafka.source.batch_fetch) or confluent-kafka's ``Message`` objects (``of_messages``, the
plain path's, and the native path's for any record that reaches the consumer's own queue). One form, so the
source reads both the same way and a test can hold the two to each other.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator, Protocol, Sequence

import numpy as np
import pyarrow as pa
from confluent_kafka import KafkaError, Message


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


class RecordFetch(Protocol):
    """The records of the partitions forwarded to it, off a consumer, as Fetched batches."""

    def forward(self, topic: str, partition: int) -> None:
        """The partition's records come here. Call it before the partition is assigned."""

    def restart(self, topic: str, partition: int, offset: int) -> None:
        """Fetch the partition again from ``offset``, after librdkafka stopped its fetch (an offset out of range
        with auto.offset.reset=error), which seek() refuses."""

    def fetch(self, max_records: int, timeout_s: float) -> Fetched | None:
        """The next records: at most max_records, waiting up to timeout_s for them; None if none came."""

    def close(self) -> None:
        """Drop what is held; before the consumer closes."""


def events_of(count: int, found: Sequence[tuple]) -> Iterator[Run | FetchError]:
    """Runs and errors from (first index, topic, partition) and (index, topic, partition, KafkaError) marks: a
    run ends where the next mark starts."""
    stops = [mark[0] for mark in found[1:]] + [count]
    for mark, stop in zip(found, stops, strict=True):
        if len(mark) == 3:
            yield Run(mark[1], mark[2], mark[0], stop)
        else:
            yield FetchError(mark[1], mark[2], mark[3])


def _headers_of(records: Sequence[Message]) -> Headers | None:
    per_record = [m.headers() or () for m in records]
    if not any(per_record):
        return None
    lists = np.zeros(len(records) + 1, np.int32)
    np.cumsum([len(h) for h in per_record], out=lists[1:])
    names = [name for h in per_record for name, _ in h]
    values = [value for h in per_record for _, value in h]
    return Headers(pa.py_buffer(lists), pa.array(names, pa.string()), pa.array(values, pa.binary()))


def of_messages(messages: Sequence[Message]) -> Fetched:
    """confluent-kafka's messages (records and errors) as a Fetched batch, in the order they came."""
    records: list[Message] = []
    marks: list[tuple] = []
    at: tuple[str, int] | None = None
    for m in messages:
        err = m.error()
        if err is not None:
            marks.append((len(records), m.topic(), m.partition() if m.partition() is not None else -1, err))
            at = None  # the records after an error start a run of their own
            continue
        if (m.topic(), m.partition()) != at:
            at = (m.topic(), m.partition())
            marks.append((len(records), *at))
        records.append(m)
    stamps = np.array([m.timestamp() for m in records], np.int64).reshape(len(records), 2)
    return Fetched(tuple(events_of(len(records), marks)), np.array([m.offset() for m in records], np.int64),
                   stamps[:, 1].copy(), stamps[:, 0].astype(np.int8),
                   pa.array([m.key() for m in records], pa.binary()),
                   pa.array([m.value() for m in records], pa.binary()), _headers_of(records))
