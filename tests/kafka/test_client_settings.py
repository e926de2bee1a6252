"""Every client kcompact makes connects at once and logs through Python logging; a user's setting wins."""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, TopicPartition

from streaming.kafka.client_log import LibrdkafkaLog
from streaming.kafka.client_settings import SPARSE_CONNECTIONS, client_settings


def test_clients_connect_at_once_unless_the_user_says_otherwise() -> None:
    made = client_settings({"bootstrap.servers": "127.0.0.1:9092"})
    assert made[SPARSE_CONNECTIONS] == "false" and isinstance(made["logger"], LibrdkafkaLog)
    assert client_settings({SPARSE_CONNECTIONS: "true"})[SPARSE_CONNECTIONS] == "true"


@pytest.mark.integration
def test_a_consumer_made_so_answers_a_first_watermark_request(bootstrap_servers, new_topic) -> None:
    topic = new_topic()
    consumer = Consumer(client_settings({"bootstrap.servers": bootstrap_servers, "group.id": "settings-test"}))
    try:
        assert consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10, cached=False) == (0, 0)
    finally:
        consumer.close()
