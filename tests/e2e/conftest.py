"""The three-node cluster of the failover tests: one per test session, whole again after each test."""

from __future__ import annotations

from typing import Iterator

import pytest

from streaming.brokers.broker import Broker
from streaming.brokers.choice import start_local_cluster
from streaming.brokers.local.cluster import LocalCluster
from tests.e2e.cluster import isr_full
from tests.e2e.helpers import wait_for


@pytest.fixture(scope="session")
def cluster_broker() -> Iterator[Broker]:
    with start_local_cluster() as broker:
        yield broker


@pytest.fixture
def cluster(cluster_broker: Broker) -> Iterator[LocalCluster]:
    """The cluster whole before and after each test: every node running and every partition's ISR full."""
    nodes = cluster_broker.cluster
    yield nodes
    for node_id in set(n.node_id for n in nodes.nodes) - set(nodes.running()):
        nodes.restart(node_id)
    wait_for(lambda: isr_full(nodes.bootstrap_servers), 180, "every ISR full again")
