"""The emitter's records, as runs of a log batch's rows, to a producer: what the native path
(streaming.kafka.sink.batch_produce) and the plain path (streaming.kafka.sink.plain_produce) share. Each record goes with its own headers,
then the offset header (streaming.kafka.headers.offset_header), then the origin header unless it carries its own
(streaming.kafka.headers.origin_header), in order."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
from confluent_kafka import KafkaError, KafkaException, Producer

from streaming.kafka.headers.origin_header import Origins
from streaming.log.columns import binary_parts, offsets_of

QUEUE_FULL = KafkaError._QUEUE_FULL  # noqa: SLF001 (librdkafka's local error, as confluent-kafka names it)


@dataclass(frozen=True)
class Columns:
    """A LOG_BATCH_SCHEMA batch as the producers read it; held until the producer is done with its records."""

    batch: pa.RecordBatch
    offsets: np.ndarray
    timestamps: np.ndarray
    key_valid: np.ndarray | None  # None: every record has a key
    key_offsets: np.ndarray
    keys: np.ndarray
    value_valid: np.ndarray | None
    value_offsets: np.ndarray
    values: np.ndarray
    header_offsets: np.ndarray
    headers: np.ndarray  # each record's headers in the log's Avro encoding

    @classmethod
    def of(cls, batch: pa.RecordBatch) -> "Columns":
        key_offsets, keys, key_valid = binary_parts(batch.column("key"))
        value_offsets, values, value_valid = binary_parts(batch.column("value"))
        header_offsets, headers, _ = binary_parts(batch.column("headers"))
        return cls(batch, offsets_of(batch).astype(np.int64, copy=False),
                   batch.column("timestamp").to_numpy(zero_copy_only=False).astype(np.int64, copy=False),
                   None if key_valid.all() else key_valid, key_offsets, keys,
                   None if value_valid.all() else value_valid, value_offsets, values, header_offsets, headers)

    @property
    def nbytes(self) -> int:
        """The bytes of its keys, values and headers: what a producer reading records from it keeps in memory."""
        return self.keys.nbytes + self.values.nbytes + self.headers.nbytes

    def tombstones(self) -> np.ndarray:
        """Indexes of the records with a key and no value."""
        keyed = np.ones(len(self.offsets), bool) if self.key_valid is None else self.key_valid
        valued = np.ones(len(self.offsets), bool) if self.value_valid is None else self.value_valid
        return np.flatnonzero(keyed & ~valued)


class RecordProduce(ABC):
    """Produces runs of records to one partition of a topic through ``producer``, with no delivery report: the
    caller produces those that need one (tombstones, for the erase audit) through ``produce()``, in order
    between runs."""

    def __init__(self, producer: Producer, topic: str, partition: int, origins: Origins) -> None:
        self.producer, self.topic, self.partition, self.origins = producer, topic, partition, origins

    @abstractmethod
    def produce(self, cols: Columns, start: int, stop: int) -> tuple[int, KafkaError | None]:
        """Records [start, stop) in order; how many went before the producer refused one, and why (its queue
        full: QUEUE_FULL, to serve deliveries and go on), or None when all went."""

    def produce_all(self, cols: Columns, start: int, stop: int, serve: float) -> None:
        """Records [start, stop), serving deliveries for ``serve`` seconds whenever the queue is full."""
        while start < stop:
            went, err = self.produce(cols, start, stop)
            start += went
            if err is None:
                return
            if err.code() != QUEUE_FULL:
                raise KafkaException(err)
            self.producer.poll(serve)


def runs_of(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Ascending row indexes as runs of consecutive rows: their starts, and their stops (one past the last), so
    a stretch of looped records is stepped over at once."""
    if rows.size == 0:
        return rows, rows
    breaks = np.flatnonzero(np.diff(rows) != 1) + 1
    return rows[np.r_[0, breaks]], rows[np.r_[breaks - 1, rows.size - 1]] + 1
