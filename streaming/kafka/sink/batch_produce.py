"""Runs of the log's records to a producer in one call each: the native path's produce.

confluent-kafka's ``produce()`` takes one record per call, as Python objects (its ``produce_batch`` takes no
headers), and a record's call cost more than librdkafka's own work for it (bench/bench_emit.py). The C
extension ``_rdkafka_columns`` hands a run of records straight from the log's Arrow columns to librdkafka, on
the same producer handle; transactions, polls and flushes stay confluent-kafka's. It copies no value: librdkafka
reads each from the batch, which is held (streaming.kafka.sink.held_buffers) until the producer is done with it.
"""

from __future__ import annotations

from confluent_kafka import KafkaError

from streaming.kafka.native import gate
from streaming.kafka.headers.offset_header import OFFSET_HEADER
from streaming.kafka.headers.origin_header import ORIGIN_HEADER, Origins
from streaming.kafka.sink.held_buffers import HeldBuffers
from streaming.kafka.sink.record_produce import Columns, RecordProduce


class BatchProduce(RecordProduce):
    """Through ``held``'s producer's librdkafka handle, a run of records in one C call; ``held`` keeps each batch
    any record went from."""

    def __init__(self, held: HeldBuffers, client_id: str, topic: str, partition: int, origins: Origins) -> None:
        gate.check_handle(held.producer, gate.PRODUCER, client_id)  # a tested client, and its handle where it is read
        super().__init__(held.producer, topic, partition, origins)
        self.held = held

    def produce(self, cols: Columns, start: int, stop: int) -> tuple[int, KafkaError | None]:
        self.held.hold(cols)
        went, code = gate.columns().produce_rows(
            self.producer, self.topic, self.partition, OFFSET_HEADER, ORIGIN_HEADER, self.origins.source_value,
            cols.offsets, cols.timestamps,
            cols.key_valid, cols.key_offsets, cols.keys, cols.value_valid, cols.value_offsets, cols.values,
            cols.header_offsets, cols.headers, start, stop)
        if code == 0:
            return went, None
        fatal = gate.columns().fatal_error(self.producer)
        if fatal is not None:
            return went, KafkaError(fatal[0], fatal[1], fatal=True)
        return went, KafkaError(code)
