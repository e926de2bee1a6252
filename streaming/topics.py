"""Topic administration shared by the CLI, the demo and the tests."""

from __future__ import annotations

import uuid
from typing import Mapping

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, NewTopic


def unique_topic_name(prefix: str = "kcompact") -> str:
    """Topic names that never collide across tests or runs sharing one broker."""
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def create_topic(bootstrap_servers: str, name: str, partitions: int = 1,
                 config: Mapping[str, str] | None = None, timeout_s: float = 30.0,
                 client_config: Mapping[str, str] | None = None) -> str:
    """Create a topic and wait until the broker confirms it; raise with the topic name on failure."""
    admin = AdminClient({"bootstrap.servers": bootstrap_servers, **(client_config or {})})
    futures = admin.create_topics(
        [NewTopic(name, num_partitions=partitions, replication_factor=1, config=dict(config or {}))],
        operation_timeout=timeout_s, request_timeout=timeout_s)
    try:
        futures[name].result(timeout=timeout_s)
    except KafkaException as exc:
        raise RuntimeError(f"could not create topic {name!r} on {bootstrap_servers}: {exc}") from exc
    return name
