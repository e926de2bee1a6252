"""The local Apache Kafka broker: its pinned jars (fetched with Maven) and its process."""

from streaming.brokers.local.jars import KafkaJars, KafkaJarsError, ensure_kafka_jars
from streaming.brokers.local.server import LocalKafka, LocalKafkaError, free_port

__all__ = ["KafkaJars", "KafkaJarsError", "LocalKafka", "LocalKafkaError", "ensure_kafka_jars", "free_port"]
