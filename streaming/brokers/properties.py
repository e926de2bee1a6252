"""One Apache Kafka node's configuration, the same in every form the project runs it in: a local JVM, a
node of a local three-node cluster, or the project's Kafka image in a container (which reads it from
KAFKA_* environment variables, as the official apache/kafka image does).

Every node is a combined broker and controller (KRaft) with five listeners:

- PLAINTEXT, for the other brokers and for set-up (its principal, ANONYMOUS, is a super user);
- CONTROLLER, for the quorum;
- SASL_PLAINTEXT, taking PLAIN logins of the given users (super users too, as before ACLs were enforced;
  SCRAM-SHA-256 is offered with no credentials, so a client using it is refused as by a cluster that does
  not know it);
- SSL, which requires a client certificate (mTLS; the principal is the certificate's CN);
- SASL_SSL, taking SCRAM-SHA-512 logins of users made at start (streaming.kafka.access.acls).

A node whose clients reach it through a proxy (Toxiproxy, in the network-fault tests) advertises the
proxy's address for PLAINTEXT and gets a sixth listener, INTERNAL, for the other brokers: a fault between
the clients and one node then leaves replication and the quorum alone.

ACLs are enforced (KRaft's StandardAuthorizer, allow.everyone.if.no.acl.found=false): a principal that is
not a super user may do only what an ACL grants it, as on a production cluster. The log cleaner runs with a
short back-off, so tests can use Kafka's own cleaner as an oracle.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from streaming.security.certificates import Certificates

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
    ssl: str
    sasl_ssl: str
    proxied: str = ""   # where clients reach PLAINTEXT instead (a proxy), advertised in its place
    internal: str = ""  # the brokers' own listener when clients come through a proxy


ADMIN_USER = "admin"  # the SCRAM super user of the SASL_SSL listener
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
SCRAM_MECHANISM = "SCRAM-SHA-512"
# An mTLS client's principal is its certificate's CN, not the whole distinguished name.
CN_PRINCIPAL_RULE = "RULE:^CN=([^,]*).*$/$1/,DEFAULT"


def broker_properties(node_id: int, listeners: Listeners, voters: str, log_dirs: str,
                      sasl_users: Mapping[str, str], certificates: Certificates,
                      replication: Replication = SINGLE_NODE) -> dict[str, str]:
    """``voters``: the quorum, as controller.quorum.voters takes it (``1@host:port,2@host:port,...``). Every
    listener binds the host it advertises (127.0.0.1 here)."""
    r = replication
    internal = f",INTERNAL://{listeners.internal}" if listeners.proxied else ""
    scram_login = "org.apache.kafka.common.security.scram.ScramLoginModule required ;"
    super_users = ["User:ANONYMOUS", f"User:{ADMIN_USER}", *(f"User:{u}" for u in sasl_users)]
    return {
        "process.roles": "broker,controller",
        "node.id": str(node_id),
        "controller.quorum.voters": voters,
        "listeners": f"PLAINTEXT://{listeners.broker},CONTROLLER://{listeners.controller},"
                     f"SASL_PLAINTEXT://{listeners.sasl},SSL://{listeners.ssl},SASL_SSL://{listeners.sasl_ssl}"
                     + internal,
        "advertised.listeners": f"PLAINTEXT://{listeners.proxied or listeners.broker},SASL_PLAINTEXT://{listeners.sasl},"
                                f"SSL://{listeners.ssl},SASL_SSL://{listeners.sasl_ssl}" + internal,
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "INTERNAL" if listeners.proxied else "PLAINTEXT",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,"
                                          "SSL:SSL,SASL_SSL:SASL_SSL,INTERNAL:PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config":
            "org.apache.kafka.common.security.plain.PlainLoginModule required "
            + "".join(f'user_{u}="{pw}" ' for u, pw in sasl_users.items()) + ";",
        "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config": scram_login,
        "listener.name.sasl_ssl.sasl.enabled.mechanisms": SCRAM_MECHANISM,
        "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": scram_login,
        "listener.name.ssl.ssl.client.auth": "required",
        **certificates.broker_settings(),
        "ssl.principal.mapping.rules": CN_PRINCIPAL_RULE,
        "authorizer.class.name": AUTHORIZER,
        "super.users": ";".join(super_users),
        "allow.everyone.if.no.acl.found": "false",
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
