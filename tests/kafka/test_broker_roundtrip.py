"""The fixture's broker keeps every field the compactor depends on, byte for byte."""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

pytestmark = pytest.mark.integration

RECORDS = [
    # key, value, headers (repeated key and null header value on purpose), timestamp ms
    (b"k1", b"v1", [("h", b"a"), ("h", b"b"), ("empty", None)], 1_600_000_000_000),
    (b"k2", b"\x00\xffbinary", [], 1_600_000_000_500),
    (b"k1", None, [("reason", b"delete")], 1_600_000_001_000),
    (b"\xfe\xfenon-utf8-key", b"", [("x", b"")], 1_500_000_000_000),
]


def test_produced_records_read_back_identically(bootstrap_servers: str, new_topic) -> None:
    topic = new_topic(partitions=1)
    producer = Producer({"bootstrap.servers": bootstrap_servers, "enable.idempotence": True})
    delivered: list[int] = []
    for key, value, headers, ts in RECORDS:
        producer.produce(topic, key=key, value=value, headers=headers, timestamp=ts, partition=0,
                         on_delivery=lambda err, msg: delivered.append(msg.offset()) if err is None else None)
    assert producer.flush(30) == 0
    assert delivered == list(range(len(RECORDS)))

    consumer = Consumer({"bootstrap.servers": bootstrap_servers, "group.id": topic,
                         "enable.auto.commit": False, "isolation.level": "read_committed"})
    consumer.assign([TopicPartition(topic, 0, 0)])
    got = []
    while len(got) < len(RECORDS):
        batch = consumer.consume(len(RECORDS) - len(got), timeout=10)
        assert batch, f"only {len(got)} of {len(RECORDS)} records came back"
        got.extend(batch)
    consumer.close()

    assert [m.error() for m in got] == [None] * len(RECORDS)
    assert [m.offset() for m in got] == list(range(len(RECORDS)))
    assert [m.key() for m in got] == [r[0] for r in RECORDS]
    assert [m.value() for m in got] == [r[1] for r in RECORDS]
    assert [m.headers() or [] for m in got] == [r[2] for r in RECORDS]
    assert [m.timestamp()[1] for m in got] == [r[3] for r in RECORDS]
