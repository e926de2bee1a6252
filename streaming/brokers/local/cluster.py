"""A local Apache Kafka cluster: three combined broker and controller nodes (KRaft), each its own JVM on
127.0.0.1, with replication 3 and min.insync.replicas 2 for every topic and for the transaction state log.

The nodes are formatted with one cluster id and started together (a node's broker comes up only once a
quorum of controllers runs), each with a capped heap so the cluster and a Spark job fit beside each other
on two cores. Each node can be stopped (SIGTERM, a controlled shutdown), killed (SIGKILL), frozen (SIGSTOP)
and resumed, and started again on its data and ports: what the failover tests do to it. Which node leads
a partition, coordinates a transactional id or leads the metadata quorum is read from the cluster itself.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import tempfile
from pathlib import Path
from typing import Mapping

from streaming.brokers.local.server import LocalKafka, LocalKafkaError, Proxied
from streaming.brokers.properties import THREE_NODES
from streaming.security.certificates import make_certificates

NODES = 3
NODE_HEAP = "-Xmx512m"
QUORUM_STATE = Path("logs") / "__cluster_metadata-0" / "quorum-state"


class LocalCluster:
    def __init__(self, data_dir: str | Path | None = None, sasl_users: Mapping[str, str] | None = None,
                 nodes: int = NODES, heap: str = NODE_HEAP, proxied: list[Proxied] | None = None) -> None:
        """``proxied``: per node, a proxy in front of its PLAINTEXT listener (LocalKafka)."""
        self.owns_dir = data_dir is None
        self.data_dir = Path(tempfile.mkdtemp(prefix="kcompact-cluster-")) if data_dir is None else Path(data_dir)
        self.certificates = make_certificates(self.data_dir / "tls")
        self.nodes = [LocalKafka(self.data_dir / f"node-{i}", sasl_users=sasl_users, node_id=i,
                                 replication=THREE_NODES, heap=heap, certificates=self.certificates,
                                 proxied=proxied[i - 1] if proxied else None)
                      for i in range(1, nodes + 1)]
        voters = ",".join(n.voter for n in self.nodes)
        for n in self.nodes:
            n.voters = voters
            n.cluster_id = self.nodes[0].cluster_id

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(n.bootstrap_servers for n in self.nodes)

    @property
    def direct_bootstrap_servers(self) -> str:
        return ",".join(n.direct_bootstrap_servers for n in self.nodes)

    @property
    def sasl_bootstrap_servers(self) -> str:
        return ",".join(n.sasl_bootstrap_servers for n in self.nodes)

    @property
    def ssl_bootstrap_servers(self) -> str:
        return ",".join(n.ssl_bootstrap_servers for n in self.nodes)

    @property
    def sasl_ssl_bootstrap_servers(self) -> str:
        return ",".join(n.sasl_ssl_bootstrap_servers for n in self.nodes)

    def node(self, node_id: int) -> LocalKafka:
        return self.nodes[node_id - 1]

    def start(self, timeout_s: float = 180.0) -> None:
        """Start every node that is not running, together, and wait until each has started."""
        idle = [n for n in self.nodes if n.proc is None or n.proc.poll() is not None]
        try:
            for n in idle:
                n.launch()
            for n in idle:
                n.wait_started(timeout_s)
        except LocalKafkaError:
            self.stop()
            raise

    def restart(self, node_id: int, timeout_s: float = 180.0) -> None:
        node = self.node(node_id)
        node.launch()
        node.wait_started(timeout_s)

    def terminate(self, node_id: int) -> None:
        """A controlled shutdown of one node (SIGTERM): leadership moves away before it goes."""
        self.node(node_id).terminate()

    def kill(self, node_id: int) -> None:
        """SIGKILL, as a crash."""
        self.node(node_id).kill()

    def freeze(self, node_id: int) -> None:
        """SIGSTOP: the process is there but answers nothing, as a node in a long GC pause or behind a
        partition would be."""
        os.killpg(self.node(node_id).pid, signal.SIGSTOP)

    def thaw(self, node_id: int) -> None:
        os.killpg(self.node(node_id).pid, signal.SIGCONT)

    def running(self) -> list[int]:
        return [n.node_id for n in self.nodes if n.proc is not None and n.proc.poll() is None]

    def quorum_leader(self) -> int | None:
        """The active controller: the leader of the newest epoch any node's quorum state records."""
        newest: tuple[int, int] | None = None
        for n in self.nodes:
            with contextlib.suppress(FileNotFoundError, ValueError, KeyError):
                state = json.loads((n.data_dir / QUORUM_STATE).read_text())
                epoch, leader = int(state["leaderEpoch"]), int(state["leaderId"])
                if leader >= 0 and (newest is None or epoch > newest[0]):
                    newest = (epoch, leader)
        return None if newest is None else newest[1]

    def stop(self) -> None:
        """Every node down (a frozen one resumed first), and the data gone if it was ours. Data that stays gets
        a controlled shutdown, every node signalled at once: one after another, the last would wait out its
        grace period with no quorum left. Data that goes is killed: a controlled shutdown would keep nothing."""
        live = [n for n in self.nodes if n.proc is not None and n.proc.poll() is None]
        for n in live:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(n.proc.pid, signal.SIGCONT)
        if self.owns_dir:
            for n in live:
                n.kill()
            shutil.rmtree(self.data_dir, ignore_errors=True)
            return
        for n in live:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(n.proc.pid, signal.SIGTERM)
        for n in live:
            n.terminate()

