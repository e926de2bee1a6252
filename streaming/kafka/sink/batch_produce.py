"""Runs of the log's records to a producer in one call each: the native path's produce.

confluent-kafka's ``produce()`` takes one record per call, as Python objects (its ``produce_batch`` takes no
headers), and a record's call cost more than librdkafka's own work for it (bench/bench_emit.py). The C
extension ``_rdkafka_columns`` hands a run of records straight from the log's Arrow columns to librdkafka, on
the same producer handle; transactions, polls and flushes stay confluent-kafka's.
"""

from __future__ import annotations

from confluent_kafka import KafkaError, Producer

from streaming.kafka.native import gate
from streaming.kafka.headers.offset_header import OFFSET_HEADER
from streaming.kafka.headers.origin_header import ORIGIN_HEADER, Origins
from streaming.kafka.sink.record_produce import Columns, RecordProduce


class BatchProduce(RecordProduce):
    """Through ``producer``'s librdkafka handle, a run of records in one C call."""

    def __init__(self, producer: Producer, client_id: str, topic: str, partition: int, origins: Origins) -> None:
        gate.check_handle(producer, gate.PRODUCER, client_id)  # a tested client, and its handle where it is read
        super().__init__(producer, topic, partition, origins)

    def produce(self, cols: Columns, start: int, stop: int) -> tuple[int, KafkaError | None]:
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
