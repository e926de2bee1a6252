"""The batch produce: runs of the log's records to librdkafka in one call, each with its own headers and the offset
header. The oracle is a read_committed consumer's view of the sink: keys, values, timestamps and headers as
the log held them, in order, through a producer queue far smaller than the run."""

from __future__ import annotations

import uuid

import pyarrow as pa
import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from streaming.kafka.sink.batch_produce import BatchProduce
from streaming.kafka.sink.held_buffers import HeldBuffers
from streaming.kafka.native.gate import DEFAULT_CLIENT_ID
from streaming.kafka.sink.record_produce import Columns
from streaming.log import batch_from_records, make_record
from tests.kafka_helpers import ORIGINS

OFFSET = "kcompact.offset"


def _records(count: int) -> list:
    return [make_record(100 + i, None if i % 7 == 3 else b"k%d" % i, None if i % 5 == 4 else b"v" * (i % 40),
                        1_000 + i, [("h", b"x%d" % i), ("n", None), ("h", b"")] if i % 3 == 0 else [])
            for i in range(count)]


def _read(bootstrap_servers: str, topic: str, count: int) -> list[tuple]:
    consumer = Consumer({"bootstrap.servers": bootstrap_servers, "group.id": uuid.uuid4().hex,
                         "isolation.level": "read_committed", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    got: list[tuple] = []
    try:
        while len(got) < count:
            msgs = consumer.consume(count, timeout=10.0)
            assert msgs, f"only {len(got)} of {count} records came"
            got += [(m.key(), m.value(), m.timestamp()[1], m.headers() or []) for m in msgs if m.error() is None]
    finally:
        consumer.close()
    return got


@pytest.mark.integration
def test_a_run_goes_in_order_with_every_header_through_a_full_queue(bootstrap_servers, new_topic) -> None:
    topic = new_topic()
    records = _records(300)
    producer = Producer({"bootstrap.servers": bootstrap_servers, "transactional.id": uuid.uuid4().hex,
                         "queue.buffering.max.messages": 16, "linger.ms": 1})
    producer.init_transactions(30)
    batch = BatchProduce(HeldBuffers(producer), DEFAULT_CLIENT_ID, topic, 0, ORIGINS)
    cols = Columns.of(batch_from_records(records))
    producer.begin_transaction()
    batch.produce_all(cols, 0, 150, serve=0.05)
    batch.produce_all(cols, 150, 300, serve=0.05)
    producer.commit_transaction(30)
    got = _read(bootstrap_servers, topic, len(records))
    want = [(r["key"], r["value"], r["timestamp"],
             [(h["key"], h["value"]) for h in r["headers"]] + [(OFFSET, str(r["offset"]).encode()),
                                                               ("kcompact.origin", ORIGINS.source_value)])
            for r in records]
    assert got == want


@pytest.mark.integration
def test_headers_that_are_not_the_logs_encoding_are_refused_with_nothing_sent(bootstrap_servers, new_topic) -> None:
    topic = new_topic()
    batch = batch_from_records(_records(3))
    broken = batch.set_column(batch.schema.get_field_index("headers"), "headers",
                              pa.array([b"\x00", b"\x02\x7f", b"\x00"], pa.binary()))
    producer = Producer({"bootstrap.servers": bootstrap_servers, "transactional.id": uuid.uuid4().hex})
    producer.init_transactions(30)
    producer.begin_transaction()
    produce = BatchProduce(HeldBuffers(producer), DEFAULT_CLIENT_ID, topic, 0, ORIGINS)
    went, err = produce.produce(Columns.of(broken), 0, 3)
    assert went == 1 and err is not None and err.code() == KafkaError._BAD_MSG
    with pytest.raises(KafkaException):
        produce.produce_all(Columns.of(broken), 1, 3, serve=0.05)
    producer.abort_transaction(30)
