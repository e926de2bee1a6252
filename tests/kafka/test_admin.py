"""A client that asked in vain is not asked again, and offsets are read once every request has its answer."""

from __future__ import annotations

import concurrent.futures

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from streaming.brokers.local.server import free_port
from streaming.kafka.admin import Cluster, create_topic, unique_topic_name, watermarks
from streaming.kafka.failures import is_transient
from streaming.partition_id import PartitionId


def test_end_offsets_that_got_no_answer_leave_a_new_client_for_the_next_call() -> None:
    """The client would go on asking the leaders it knew (a dead one, after a node was killed) for minutes: each
    stage's read of the ends waited out its timeout again, long after the election (the failover drill of
    tests/e2e/test_failover_moments.py). Here nothing listens at the address: no answer at all."""
    cluster = Cluster("sink", f"127.0.0.1:{free_port()}", {"socket.connection.setup.timeout.ms": "1000"})
    asked = cluster.admin
    with pytest.raises(KafkaException) as raised:
        cluster.end_offsets([PartitionId("sink-topic", 0)], timeout_s=1)
    assert is_transient(raised.value), raised.value
    assert cluster.admin is not asked


class _Recording(AdminClient):
    """A real admin client that keeps the futures of the requests it was asked to make."""

    def __init__(self, conf: dict) -> None:
        super().__init__(conf)
        self.futures: list[concurrent.futures.Future] = []

    def list_offsets(self, *args, **kwargs):
        asked = super().list_offsets(*args, **kwargs)
        self.futures += asked.values()
        return asked


@pytest.mark.integration
def test_offsets_are_read_only_once_every_request_has_its_answer(bootstrap_servers: str) -> None:
    """With librdkafka: a partition that does not exist fails its answer at once, while the other request of the
    same client is still out (streaming.kafka.answers says why that matters)."""
    topic = create_topic(bootstrap_servers, unique_topic_name("answers"), 8)
    admin = _Recording({"bootstrap.servers": bootstrap_servers})
    asked = [PartitionId(topic, 99), *(PartitionId(topic, p) for p in range(8))]
    for _ in range(5):
        with pytest.raises(KafkaException):
            watermarks(admin, asked, True, 10)
        assert all(f.done() for f in admin.futures), "a request was still out when the failure was raised"
        admin.futures.clear()
