"""Plain producing and reading of records, for the demo and the change generator: the CLI's only way
to Kafka besides the job, so confluent_kafka stays inside this package."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Sequence

from confluent_kafka import Consumer, Producer, TopicPartition


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
        self._producer = Producer({"bootstrap.servers": bootstrap_servers, "enable.idempotence": True})

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


def read_committed(bootstrap_servers: str, topic: str, partitions: int, timeout_s: float = 30.0) -> list[TopicRecord]:
    """Every committed record of the topic's partitions now, partition by partition."""
    settings = {"bootstrap.servers": bootstrap_servers, "group.id": f"{topic}-reader", "enable.auto.commit": False}
    consumer = Consumer({**settings, "isolation.level": "read_committed"})
    # The high watermark, not the last stable offset a read_committed client is told: that one can trail a
    # transaction committed a moment ago, whose records would then be missed.
    marks = Consumer({**settings, "isolation.level": "read_uncommitted"})
    out = []
    try:
        for p in range(partitions):
            _, high = marks.get_watermark_offsets(TopicPartition(topic, p), timeout=10, cached=False)
            consumer.assign([TopicPartition(topic, p, 0)])
            deadline = time.monotonic() + timeout_s
            # the last transaction's markers may land a moment after its commit: read until the position
            # passes the high watermark, not until the first empty poll
            while high and consumer.position([TopicPartition(topic, p)])[0].offset < high:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{topic}-{p}: could not read up to offset {high} within {timeout_s:.0f}s")
                out.extend(TopicRecord(m.key(), m.value(), tuple(m.headers() or ()), m.offset())
                           for m in consumer.consume(100, timeout=1) if m.error() is None)
    finally:
        consumer.close()
        marks.close()
    return out
