"""The README's first command: a few keyed records, a tombstone, and what the broker gives back."""

from __future__ import annotations

from typing import TextIO

from confluent_kafka import Consumer, Producer, TopicPartition

from streaming.topics import create_topic, unique_topic_name

DEMO_RECORDS: list[tuple[bytes, bytes | None]] = [
    (b"user-1", b'{"name": "Ada", "v": 1}'),
    (b"user-2", b'{"name": "Grace", "v": 1}'),
    (b"user-1", b'{"name": "Ada Lovelace", "v": 2}'),
    (b"user-3", b'{"name": "Edsger", "v": 1}'),
    (b"user-2", None),
]


def _show(b: bytes | None) -> str:
    return "null (tombstone)" if b is None else b.decode("utf-8", "replace")


def run_demo(bootstrap_servers: str, out: TextIO) -> int:
    topic = create_topic(bootstrap_servers, unique_topic_name("kcompact-demo"), partitions=1,
                         config={"retention.ms": "-1"})
    print(f"created topic {topic} on {bootstrap_servers}", file=out)
    producer = Producer({"bootstrap.servers": bootstrap_servers, "enable.idempotence": True})
    for i, (key, value) in enumerate(DEMO_RECORDS):
        producer.produce(topic, key=key, value=value, partition=0, headers=[("demo.seq", str(i).encode())])
    if producer.flush(30) != 0:
        raise RuntimeError(f"demo records not acknowledged by {bootstrap_servers}")
    consumer = Consumer({"bootstrap.servers": bootstrap_servers, "group.id": f"{topic}-reader",
                         "enable.auto.commit": False, "isolation.level": "read_committed"})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        got = []
        while len(got) < len(DEMO_RECORDS):
            batch = consumer.consume(len(DEMO_RECORDS) - len(got), timeout=10)
            if not batch:
                raise RuntimeError(f"read back {len(got)} of {len(DEMO_RECORDS)} demo records from {topic}")
            for m in batch:
                if m.error():
                    raise RuntimeError(f"reading {topic}: {m.error()}")
                got.append(m)
    finally:
        consumer.close()
    print(f"{'offset':>6}  {'key':<8} value", file=out)
    for m in got:
        print(f"{m.offset():>6}  {_show(m.key()):<8} {_show(m.value())}", file=out)
    print(f"read back {len(got)} records, {sum(m.value() is None for m in got)} tombstone(s)", file=out)
    return 0
