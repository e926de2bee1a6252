"""Plain producing and reading of records: the demo's and the change generator's way to Kafka, and the one
committed-record reader the emitter's progress recovery and offset translation share."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Iterator, Mapping, Sequence

from confluent_kafka import Consumer, KafkaException, Message, Producer, TopicPartition

from streaming.kafka.client_log import with_client_log


@dataclass(frozen=True)
class TopicRecord:
    key: bytes | None
    value: bytes | None
    headers: Sequence[tuple[str, bytes | None]] = field(default_factory=tuple)
    offset: int = -1  # where the topic stored it; -1 before it is produced


class RecordProducer:
    """An idempotent producer: records of one key keep their order across retries."""

    def __init__(self, bootstrap_servers: str) -> None:
        self.bootstrap_servers = bootstrap_servers
        self._producer = Producer(with_client_log({"bootstrap.servers": bootstrap_servers, "enable.idempotence": True}))

    def send(self, topic: str, record: TopicRecord, partition: int | None = None) -> None:
        extra = {} if partition is None else {"partition": partition}
        while True:
            try:
                self._producer.produce(topic, key=record.key, value=record.value, headers=list(record.headers),
                                       **extra)
                break
            except BufferError:  # the local queue is full: let deliveries drain it
                self._producer.poll(0.05)
        self._producer.poll(0)

    def flush(self, timeout_s: float = 30.0) -> None:
        if self._producer.flush(timeout_s) != 0:
            raise RuntimeError(f"records not acknowledged by {self.bootstrap_servers} within {timeout_s:.0f}s")


def committed_messages(client_config: Mapping[str, str], topic: str, partition: int, start: int, high: int,
                       timeout_s: float, purpose: str = "") -> Iterator[Message]:
    """The committed records of one partition from ``start`` up to ``high``, in offset order.

    Each read has a consumer of its own: one reassigned to another offset can still hand out records it
    fetched for the old one. The read ends when the position passes ``high``, never at the first empty
    poll: a slow fetch, or transaction markers that land a moment after their commit, would otherwise pass
    for the end."""
    tp = TopicPartition(topic, partition)
    consumer = Consumer(with_client_log({**client_config, "enable.auto.commit": False, "isolation.level": "read_committed",
                         "auto.offset.reset": "earliest"}))
    try:
        consumer.assign([TopicPartition(topic, partition, start)])
        deadline = time.monotonic() + timeout_s
        while consumer.position([tp])[0].offset < high:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{topic}-{partition}: could not read [{start}, {high}) within {timeout_s:.0f}s"
                                   f"{' ' + purpose if purpose else ''}")
            for m in consumer.consume(max(1, min(high - start, 1000)), timeout=1.0):
                if m.error() is not None:
                    raise KafkaException(m.error())
                if m.offset() < high:
                    yield m
    finally:
        consumer.close()


def read_committed(bootstrap_servers: str, topic: str, partitions: int, timeout_s: float = 30.0) -> list[TopicRecord]:
    """Every committed record of the topic's partitions now, partition by partition."""
    settings = {"bootstrap.servers": bootstrap_servers, "group.id": f"{topic}-reader"}
    # The high watermark, not the last stable offset a read_committed client is told: that one can trail a
    # transaction committed a moment ago, whose records would then be missed.
    marks = Consumer(with_client_log({**settings, "isolation.level": "read_uncommitted"}))
    try:
        highs = [marks.get_watermark_offsets(TopicPartition(topic, p), timeout=10, cached=False)[1]
                 for p in range(partitions)]
    finally:
        marks.close()
    return [TopicRecord(m.key(), m.value(), tuple(m.headers() or ()), m.offset())
            for p, high in enumerate(highs) if high
            for m in committed_messages(settings, topic, p, 0, high, timeout_s)]
