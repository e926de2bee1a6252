"""Runs of the log's records to a producer through confluent-kafka's own ``produce()``, a call per record: the
plain path, taken where the native one cannot run (streaming.kafka.native.gate) or is turned off
(``--kafka-native off``)."""

from __future__ import annotations

from confluent_kafka import KafkaError

from streaming.kafka.headers import offset_header
from streaming.kafka.sink.record_produce import QUEUE_FULL, Columns, RecordProduce
from streaming.log.columns import header_lists


class PlainProduce(RecordProduce):
    """A record a ``produce()`` call, each column of the run read once."""

    def produce(self, cols: Columns, start: int, stop: int) -> tuple[int, KafkaError | None]:
        run = cols.batch.slice(start, stop - start)
        rows = zip(run.column("offset").to_pylist(), run.column("timestamp").to_pylist(),
                   run.column("key").to_pylist(), run.column("value").to_pylist(),
                   header_lists(run.column("headers")), strict=True)
        produce, topic, partition, header = self.producer.produce, self.topic, self.partition, offset_header.OFFSET_HEADER
        origin = self.origins.sink_headers
        went = 0
        for offset, timestamp, key, value, headers in rows:
            try:
                produce(topic, value, key, partition, timestamp=timestamp,
                        headers=origin([*headers, (header, offset_header.encode(offset))]))
            except BufferError:
                return went, KafkaError(QUEUE_FULL)
            went += 1
        return went, None
