"""Plain producing and reading of records: the demo's and the change generator's way to Kafka, and the one
committed-record reader the emitter's progress recovery and offset translation share."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Iterator, Mapping, Sequence

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition

from streaming.kafka.client_settings import client_settings
from streaming.kafka.failures import UNUSED_GROUP_REFUSED


@dataclass(frozen=True)
class TopicRecord:
    key: bytes | None
    value: bytes | None
    headers: Sequence[tuple[str, bytes | None]] = field(default_factory=tuple)
    offset: int = -1  # where the topic stored it; -1 before it is produced
    timestamp_ms: int = -1  # the record's timestamp, as read; -1 before it is produced


class RecordProducer:
    """An idempotent producer: records of one key keep their order across retries. A record the cluster
    refused (no WRITE ACL, a topic gone) fails the flush, naming why, rather than going missing."""

    def __init__(self, bootstrap_servers: str, settings: Mapping[str, str] | None = None) -> None:
        self.bootstrap_servers = bootstrap_servers
        self._failed: list[KafkaError] = []
        self._producer = Producer(client_settings({"bootstrap.servers": bootstrap_servers, **(settings or {}),
                                                   "enable.idempotence": True, "on_delivery": self._delivered}))

    def _delivered(self, err: KafkaError | None, _msg) -> None:
        if err is not None:
            self._failed.append(err)

    def send(self, topic: str, record: TopicRecord, partition: int | None = None, keep_time: bool = False) -> None:
        """``keep_time``: the record keeps its timestamp (a copy of a record read elsewhere)."""
        extra = {} if partition is None else {"partition": partition}
        if keep_time and record.timestamp_ms >= 0:
            extra["timestamp"] = record.timestamp_ms
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
        if self._failed:
            raise RuntimeError(f"{len(self._failed)} records refused by {self.bootstrap_servers}: "
                               f"{self._failed[0].str()}")


class PartitionReader:
    """One consumer of one partition, moved from read to read by seek: read_committed unless asked for
    everything (``committed=False``: what lies past the last stable offset).

    librdkafka's seek purges what was fetched for the old position, so one consumer serves every read of a
    binary search or a progress recovery without a connection each. A short fetch.wait.max.ms keeps a seek
    from waiting out the broker's long poll (500 ms by default) that a fetch at the partition's end is in.
    A read ends when the position passes ``high``, never at the first empty poll: a slow fetch, or
    transaction markers that land a moment after their commit, would otherwise pass for the end."""

    POLL_S = 0.1

    def __init__(self, client_config: Mapping[str, str], topic: str, partition: int, committed: bool = True) -> None:
        self.tp = TopicPartition(topic, partition)
        isolation = "read_committed" if committed else "read_uncommitted"
        self._consumer = Consumer(client_settings({**client_config, "enable.auto.commit": False,
                                                   "isolation.level": isolation,
                                                   "auto.offset.reset": "earliest", "fetch.wait.max.ms": 10}))
        self._assigned = False

    def __enter__(self) -> "PartitionReader":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def client(self) -> Consumer:
        """The consumer itself, for a metadata refresh between two tries of a read."""
        return self._consumer

    def close(self) -> None:
        self._consumer.close()

    def watermarks(self, timeout_s: float) -> tuple[int, int]:
        """The log start offset and the end asked of the leader now: the last stable offset when reading
        committed records, else the high watermark."""
        return self._consumer.get_watermark_offsets(self.tp, timeout=timeout_s, cached=False)

    def read(self, start: int, high: int, timeout_s: float, purpose: str = "", batch: int = 1000) -> Iterator[Message]:
        """The committed records from ``start`` up to ``high``, in offset order; ``batch``: how many one poll
        waits for (1 when the caller wants the first record as soon as it is there)."""
        if start >= high:
            return
        at = TopicPartition(self.tp.topic, self.tp.partition, start)
        if self._assigned:
            self._consumer.seek(at)
        else:
            self._consumer.assign([at])
            self._assigned = True
        deadline = time.monotonic() + timeout_s
        while self._consumer.position([self.tp])[0].offset < high:  # a negative position: not read since the seek
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.tp.topic}-{self.tp.partition}: could not read [{start}, {high}) within "
                                   f"{timeout_s:.0f}s{' ' + purpose if purpose else ''}")
            for m in self._consumer.consume(max(1, min(high - start, batch)), timeout=self.POLL_S):
                if m.error() is not None:
                    if m.error().code() == UNUSED_GROUP_REFUSED:  # this reader uses no group
                        continue
                    raise KafkaException(m.error())
                if m.offset() < high:
                    yield m


def scan(client_config: Mapping[str, str], topic: str, partition: int, start: int, high: int,
         timeout_s: float = 120.0) -> Iterator[TopicRecord]:
    """The committed records of one partition in [start, high), one at a time: a reader of a whole topic
    holds no more than a fetch of it."""
    config = {**client_config, "group.id": f"kcompact-scan-{topic}-{partition}"}
    with PartitionReader(config, topic, partition) as reader:
        for m in reader.read(start, high, timeout_s, f"to scan {topic}-{partition}"):
            yield TopicRecord(m.key(), m.value(), tuple(m.headers() or ()), m.offset(), m.timestamp()[1])


def read_committed(bootstrap_servers: str, topic: str, partitions: int, timeout_s: float = 30.0) -> list[TopicRecord]:
    """Every committed record of the topic's partitions now, partition by partition."""
    settings = {"bootstrap.servers": bootstrap_servers, "group.id": f"{topic}-reader"}
    # The high watermark, not the last stable offset a read_committed client is told: that one can trail a
    # transaction committed a moment ago, whose records would then be missed.
    marks = Consumer(client_settings({**settings, "isolation.level": "read_uncommitted"}))
    try:
        highs = [marks.get_watermark_offsets(TopicPartition(topic, p), timeout=10, cached=False)[1]
                 for p in range(partitions)]
    finally:
        marks.close()
    records: list[TopicRecord] = []
    for p, high in enumerate(highs):
        with PartitionReader(settings, topic, p) as reader:
            records.extend(TopicRecord(m.key(), m.value(), tuple(m.headers() or ()), m.offset())
                           for m in reader.read(0, high, timeout_s))
    return records


def committed_offsets(client_config: Mapping[str, str], group: str, partitions: Sequence[TopicPartition],
                      timeout_s: float) -> list[TopicPartition]:
    """A consumer group's committed offsets (-1001 where it committed none), read by a consumer of the group
    that never joins it. Not the admin API's ListConsumerGroupOffsets: librdkafka (2.16, and its main branch)
    answers a NOT_COORDINATOR there by queueing a coordinator query on the consumer group of a client that
    has none, a NULL dereference that kills the process (librdkafka issue 5040). The fault campaign met it
    twice: a group's coordinator moves at every broker restart. A consumer looks its coordinator up again."""
    consumer = Consumer(client_settings({**client_config, "group.id": group, "enable.auto.commit": False}))
    try:
        found = consumer.committed(list(partitions), timeout=timeout_s)
    finally:
        consumer.close()
    failed = [tp for tp in found if tp.error is not None]
    if failed:  # a coordinator still loading answers per partition: the caller asks again
        raise KafkaException(failed[0].error)
    return found
