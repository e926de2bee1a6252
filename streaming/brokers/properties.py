"""One Apache Kafka node's configuration, the same in every form the project runs it in: a local JVM, a
node of a local three-node cluster, or the project's Kafka image in a container (which reads it from
KAFKA_* environment variables, as the official apache/kafka image does).

Every node is a combined broker and controller (KRaft) with three listeners: PLAINTEXT for clients and the
other brokers, CONTROLLER for the quorum, and SASL_PLAINTEXT taking PLAIN logins of the given users (SCRAM is
offered too, with no credentials, so a client that uses it is refused as by a cluster that does not know
it: the security tests need both). The log cleaner runs with a short back-off, so tests can use Kafka's own
cleaner as an oracle.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

ENV_PREFIX = "KAFKA_"


@dataclass(frozen=True)
class Replication:
    """How many copies of everything, and how many must be in sync for a write (the internal topics' too)."""

    factor: int
    min_isr: int


SINGLE_NODE = Replication(1, 1)
THREE_NODES = Replication(3, 2)


@dataclass(frozen=True)
class Listeners:
    """Where a node listens (host:port; an empty host binds every interface) and what it tells clients."""

    broker: str
    controller: str
    sasl: str
    advertised_broker: str
    advertised_sasl: str


def broker_properties(node_id: int, listeners: Listeners, voters: str, log_dirs: str,
                      sasl_users: Mapping[str, str], replication: Replication = SINGLE_NODE) -> dict[str, str]:
    """``voters``: the quorum, as controller.quorum.voters takes it (``1@host:port,2@host:port,...``)."""
    r = replication
    return {
        "process.roles": "broker,controller",
        "node.id": str(node_id),
        "controller.quorum.voters": voters,
        "listeners": f"PLAINTEXT://{listeners.broker},CONTROLLER://{listeners.controller},"
                     f"SASL_PLAINTEXT://{listeners.sasl}",
        "advertised.listeners": f"PLAINTEXT://{listeners.advertised_broker},"
                                f"SASL_PLAINTEXT://{listeners.advertised_sasl}",
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config":
            "org.apache.kafka.common.security.plain.PlainLoginModule required "
            + "".join(f'user_{u}="{pw}" ' for u, pw in sasl_users.items()) + ";",
        "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config":
            "org.apache.kafka.common.security.scram.ScramLoginModule required ;",
        "log.dirs": log_dirs,
        "num.partitions": "1",
        "default.replication.factor": str(r.factor),
        "min.insync.replicas": str(r.min_isr),
        "offsets.topic.replication.factor": str(r.factor),
        "offsets.topic.num.partitions": "4",
        "transaction.state.log.replication.factor": str(r.factor),
        "transaction.state.log.min.isr": str(r.min_isr),
        "transaction.state.log.num.partitions": "4",
        "share.coordinator.state.topic.replication.factor": str(r.factor),
        "share.coordinator.state.topic.min.isr": str(r.min_isr),
        "group.initial.rebalance.delay.ms": "0",
        "log.cleaner.enable": "true",
        "log.cleaner.backoff.ms": "1000",
        "auto.create.topics.enable": "false",
    }


def as_properties_file(properties: Mapping[str, str]) -> str:
    return "".join(f"{k}={v}\n" for k, v in properties.items())


def as_environment(properties: Mapping[str, str]) -> dict[str, str]:
    """The settings as the apache/kafka image (and the project's) read them: KAFKA_ and the name upper-cased,
    '_' written '__', '-' written '___' and '.' written '_'."""
    return {ENV_PREFIX + k.replace("_", "__").replace("-", "___").replace(".", "_").upper(): v
            for k, v in properties.items()}
