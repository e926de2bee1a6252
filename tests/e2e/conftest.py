"""The three-node cluster of the failover and network-fault tests: one per test session, its clients through
a Toxiproxy proxy per node, whole again after each test (every node up, every toxic gone, every ISR full);
and the sink cluster of the network-fault tests and the fault campaign, a broker behind a proxy of its own."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

import pytest

from streaming.brokers.broker import Broker
from streaming.brokers.choice import start_local_broker, start_local_cluster
from streaming.brokers.local import Proxied
from streaming.brokers.local.cluster import NODES, LocalCluster
from tests.e2e.cluster import isr_full
from tests.e2e.helpers import wait_for
from tests.toxiproxy import Proxy, Toxiproxy, in_front_of_nodes


@pytest.fixture(scope="session")
def cluster_proxies(toxiproxy: Toxiproxy) -> tuple[list[Proxied], list[Proxy]]:
    """Node i's proxy is the i-th: what a test puts a toxic on to cut that node off from the job."""
    return in_front_of_nodes(toxiproxy, NODES, "cluster")


@pytest.fixture(scope="session")
def cluster_broker(cluster_proxies: tuple[list[Proxied], list[Proxy]]) -> Iterator[Broker]:
    with start_local_cluster(proxied=cluster_proxies[0]) as broker:
        yield broker


@pytest.fixture
def cluster(cluster_broker: Broker, toxiproxy: Toxiproxy) -> Iterator[LocalCluster]:
    """The cluster whole before and after each test: no toxic, every node running and every partition's ISR
    full."""
    nodes = cluster_broker.cluster
    yield nodes
    toxiproxy.reset()
    for node_id in set(n.node_id for n in nodes.nodes) - set(nodes.running()):
        nodes.restart(node_id)
    wait_for(lambda: isr_full(nodes.bootstrap_servers), 180, "every ISR full again")


@dataclass(frozen=True)
class SinkSite:
    broker: Broker
    proxy: Proxy


@pytest.fixture(scope="session")
def sink_site(toxiproxy: Toxiproxy, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SinkSite]:
    """The sink cluster: a broker of its own behind its own proxy, so the job can be cut off from it and not
    from the source."""
    proxied, proxies = in_front_of_nodes(toxiproxy, 1, "sink")
    broker = start_local_broker(data_dir=tmp_path_factory.mktemp("sink-broker"), proxied=proxied[0])
    try:
        yield SinkSite(broker, proxies[0])
    finally:
        broker.stop()
