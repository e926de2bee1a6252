"""The local broker: a cluster id of Kafka's own form, listener ports no outgoing connection can take, and
a failed start that says why."""

from __future__ import annotations

import base64
import socket
import subprocess
import sys

import pytest

from streaming.brokers.local.jars import KafkaJars
from streaming.brokers.local.server import KAFKA_OPTS, LocalKafka, LocalKafkaError, cluster_id, free_port


def test_cluster_ids_are_kafka_uuids_that_no_command_line_takes_for_an_option() -> None:
    ids = [cluster_id() for _ in range(10_000)]  # about 156 of them would start with '-' if drawn plainly
    assert not [i for i in ids if i.startswith("-")]
    assert all(len(i) == 22 and len(base64.urlsafe_b64decode(i + "==")) == 16 for i in ids)
    assert len(set(ids)) == len(ids)


def test_listener_ports_lie_below_the_ephemeral_range_and_are_never_handed_out_twice() -> None:
    with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
        low = int(f.read().split()[0])
    ports = [free_port() for _ in range(300)]
    assert len(set(ports)) == len(ports)
    assert all(p < low for p in ports)


def test_a_port_handed_out_to_another_living_process_is_not_handed_out_here() -> None:
    """Two pytest workers each start brokers: a port one was given is never the other's before it binds."""
    other = subprocess.Popen([sys.executable, "-c", "import sys; from streaming.brokers.local.server import free_port; "
                              "print(*[free_port() for _ in range(300)], flush=True); sys.stdin.read()"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        theirs = set(map(int, other.stdout.readline().split()))
        ours = {free_port() for _ in range(300)}
    finally:
        other.communicate("")
    assert len(theirs) == 300 and not ours & theirs


def test_kafka_opts_reach_the_nodes_jvm_after_its_own_options_as_kafkas_scripts_add_them(tmp_path,
                                                                                          monkeypatch) -> None:
    monkeypatch.setenv(KAFKA_OPTS, " -XX:TieredStopAtLevel=1  -Dwhere=a ")
    node = LocalKafka(tmp_path / "node", jars=KafkaJars("4.4.0", tmp_path / "jars"))
    command = node._java("kafka.Kafka", "server.properties")
    assert command[command.index("-XX:+UseG1GC") + 2:][:2] == ["-XX:TieredStopAtLevel=1", "-Dwhere=a"]
    assert command[-2:] == ["kafka.Kafka", "server.properties"]


@pytest.mark.integration
def test_a_node_whose_port_is_taken_exits_and_the_error_gives_kafkas_reason(tmp_path) -> None:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        node = LocalKafka(tmp_path / "node", port=held.getsockname()[1])
        with pytest.raises(LocalKafkaError, match=r"exited with 1 while starting \(.*Address already in use"):
            node.start(120.0)
