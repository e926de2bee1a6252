"""The records of a source past what was mirrored, read: counted for the RPO of a switch, and handed one by
one to failback, which exports the diverged tail. One read_committed consumer reads every partition's range
together, so a cluster's worth of partitions costs a few fetches, not a round trip each."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from typing import Callable, Mapping

from confluent_kafka import Consumer, KafkaException, TopicPartition

from streaming.kafka.client_settings import client_settings
from streaming.kafka.clients import TopicRecord
from streaming.kafka.failures import UNUSED_GROUP_REFUSED
from streaming.partition_id import PartitionId

POLL_S = 0.1


@dataclass
class TailFigures:
    records: int = 0
    oldest_ms: int | None = None  # the smallest and the largest record timestamp among them
    newest_ms: int | None = None

    def add(self, timestamp_ms: int) -> None:
        self.records += 1
        self.oldest_ms = timestamp_ms if self.oldest_ms is None else min(self.oldest_ms, timestamp_ms)
        self.newest_ms = timestamp_ms if self.newest_ms is None else max(self.newest_ms, timestamp_ms)


def read_tails(client_config: Mapping[str, str], ranges: Mapping[PartitionId, tuple[int, int]], timeout_s: float,
               each: Callable[[PartitionId, TopicRecord], None] | None = None) -> dict[PartitionId, TailFigures]:
    """Each partition's committed records in [start, end): counted, and given to ``each`` in offset order.
    A range ends when the consumer's position passes its end, never at an empty poll."""
    figures = {p: TailFigures() for p in ranges}
    left = {p: r for p, r in ranges.items() if r[0] < r[1]}
    if not left:
        return figures
    consumer = Consumer(client_settings({**client_config, "group.id": f"kcompact-tail-{uuid.uuid4().hex}",
                                         "enable.auto.commit": False, "isolation.level": "read_committed",
                                         "auto.offset.reset": "earliest", "fetch.wait.max.ms": 10}))
    try:
        consumer.assign([TopicPartition(p.topic, p.partition, start) for p, (start, _) in left.items()])
        deadline = time.monotonic() + timeout_s
        while left:
            if time.monotonic() > deadline:
                raise TimeoutError(f"the records past what was mirrored could not be read within {timeout_s:.0f}s "
                                   f"from {', '.join(str(p) for p in list(left)[:5])}")
            for m in consumer.consume(1000, timeout=POLL_S):
                if m.error() is not None:
                    if m.error().code() == UNUSED_GROUP_REFUSED:
                        continue
                    raise KafkaException(m.error())
                pid = PartitionId(m.topic(), m.partition())
                if pid in left and m.offset() < left[pid][1]:
                    figures[pid].add(m.timestamp()[1])
                    if each is not None:
                        each(pid, TopicRecord(m.key(), m.value(), tuple(m.headers() or ()), m.offset(),
                                              m.timestamp()[1]))
            positions = consumer.position([TopicPartition(p.topic, p.partition) for p in left])
            done = [p for tp in positions if tp.offset >= left[p := PartitionId(tp.topic, tp.partition)][1]]
            if done:
                consumer.pause([TopicPartition(p.topic, p.partition) for p in done])
                for p in done:
                    del left[p]
    finally:
        consumer.close()
    return figures
