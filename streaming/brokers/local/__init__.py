"""The local Apache Kafka broker: its pinned jars (fetched with Maven) and its process."""

from streaming.brokers.local.jars import KafkaJars, KafkaJarsError, ensure_kafka_jars
from streaming.brokers.local.server import LocalKafka, LocalKafkaError, Proxied, free_port

__all__ = ["KafkaJars", "KafkaJarsError", "LocalKafka", "LocalKafkaError", "Proxied", "ensure_kafka_jars", "free_port"]
