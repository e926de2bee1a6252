"""A consumer's records through confluent-kafka's own ``consume()``, a ``Message`` per record: the plain path,
taken where the native one cannot run (streaming.kafka.native.gate) or is turned off (``--kafka-native off``).
Slower, and needing nothing of kcompact's but Python."""

from __future__ import annotations

from confluent_kafka import Consumer, TopicPartition

from streaming.kafka.source.fetched import Fetched, of_messages


class PlainFetch:
    """The records of ``consumer``'s assigned partitions, as Fetched batches."""

    def __init__(self, consumer: Consumer) -> None:
        self._consumer = consumer

    def forward(self, topic: str, partition: int) -> None:
        """Nothing to do: the partition's records come to the consumer's queue, where fetch() reads."""

    def restart(self, topic: str, partition: int, offset: int) -> None:
        """Re-assigning the partition stops and starts its fetch, from ``offset``."""
        self._consumer.incremental_unassign([TopicPartition(topic, partition)])
        self._consumer.incremental_assign([TopicPartition(topic, partition, offset)])

    def fetch(self, max_records: int, timeout_s: float) -> Fetched | None:
        messages = self._consumer.consume(max_records, timeout_s)
        return of_messages(messages) if messages else None

    def close(self) -> None:
        """Nothing is held beyond the consumer's own."""
