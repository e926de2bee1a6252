"""Runs of the log's records to a producer in one call each, every record with its headers and the offset header.

confluent-kafka's ``produce()`` takes one record per call, as Python objects (its ``produce_batch`` takes no
headers), and a record's call cost more than librdkafka's own work for it (bench/bench_emit.py). The C
extension ``_rdkafka_columns`` hands a run of records straight from the log's Arrow columns to librdkafka, on
the same producer handle; transactions, polls and flushes stay confluent-kafka's. The records go without a
delivery callback: the caller produces those that need their report (tombstones, for the erase audit)
through ``produce()``, in order between runs.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
from confluent_kafka import KafkaError, KafkaException, Producer

from streaming.kafka import librdkafka_build
from streaming.log.columns import binary_parts, offsets_of

QUEUE_FULL = KafkaError._QUEUE_FULL  # noqa: SLF001 (librdkafka's local error, as confluent-kafka names it)


@dataclass(frozen=True)
class Columns:
    """A LOG_BATCH_SCHEMA batch as the C side reads it; held while its runs are produced."""

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
        return cls(offsets_of(batch).astype(np.int64, copy=False),
                   batch.column("timestamp").to_numpy(zero_copy_only=False).astype(np.int64, copy=False),
                   None if key_valid.all() else key_valid, key_offsets, keys,
                   None if value_valid.all() else value_valid, value_offsets, values, header_offsets, headers)

    def tombstones(self) -> np.ndarray:
        """Indexes of the records with a key and no value."""
        keyed = np.ones(len(self.offsets), bool) if self.key_valid is None else self.key_valid
        valued = np.ones(len(self.offsets), bool) if self.value_valid is None else self.value_valid
        return np.flatnonzero(keyed & ~valued)


class BatchProduce:
    """Produces runs of records to one partition through ``producer``'s librdkafka handle."""

    def __init__(self, producer: Producer, client_id: str, topic: str, partition: int, offset_header: str) -> None:
        self._address = librdkafka_build.handle(producer, librdkafka_build.PRODUCER, client_id)
        self._producer = producer  # the handle lives as long as the producer object
        self.topic, self.partition, self.offset_header = topic, partition, offset_header

    def produce(self, cols: Columns, start: int, stop: int) -> tuple[int, KafkaError | None]:
        """Records [start, stop) in order; how many went before librdkafka refused one, and why (its queue
        full: QUEUE_FULL, to serve deliveries and go on), or None when all went."""
        went, code = librdkafka_build.columns().produce_rows(
            self._address, self.topic, self.partition, self.offset_header, cols.offsets, cols.timestamps,
            cols.key_valid, cols.key_offsets, cols.keys, cols.value_valid, cols.value_offsets, cols.values,
            cols.header_offsets, cols.headers, start, stop)
        if code == 0:
            return went, None
        fatal = librdkafka_build.columns().fatal_error(self._address)
        if fatal is not None:
            return went, KafkaError(fatal[0], fatal[1], fatal=True)
        return went, KafkaError(code)

    def produce_all(self, cols: Columns, start: int, stop: int, serve: float) -> None:
        """Records [start, stop), serving deliveries for ``serve`` seconds whenever the queue is full."""
        while start < stop:
            went, err = self.produce(cols, start, stop)
            start += went
            if err is None:
                return
            if err.code() != QUEUE_FULL:
                raise KafkaException(err)
            self._producer.poll(serve)
