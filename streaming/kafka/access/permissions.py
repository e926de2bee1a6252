"""The ACLs a job's principal needs on each cluster, and a check of them at start.

The least set, as Kafka's authorizer judges it (READ and WRITE imply DESCRIBE, ALTER_CONFIGS implies
DESCRIBE_CONFIGS):

- source: READ and DESCRIBE_CONFIGS on each mirrored topic (prefixed ACLs serve a pattern: a topic the
  principal may not describe is not listed to it, so it is not mirrored);
- sink: CREATE, WRITE, READ (the progress a restart recovers is read from the sink) and ALTER (partitions
  follow the source's) on each sink topic; WRITE on the transactional ids ``kcompact-<job>-<slot>`` (a grant
  on the prefix ``kcompact-``);
- the dead-letter topic: CREATE and WRITE;
- group offset sync: DESCRIBE on the groups on the source, READ on them on the sink;
- topic ACL sync: DESCRIBE on the source cluster, ALTER on the sink cluster.

No ALTER_CONFIGS (a sink is created with its settings, never altered) and no IDEMPOTENT_WRITE (WRITE on a
transactional id implies it since Kafka 3.0). Librdkafka's consumers look up their group's coordinator even
when they only read assigned partitions; the refusal that lookup gets is harmless and needs no group ACL.

The check asks the clusters what the principal may do (KIP-430's authorized operations, validate-only
creation), so a missing ACL is one line naming it before anything is created. WRITE and READ on a sink
topic that does not exist yet can only be asked once it does: those two are checked right after the sink
topics are created, before the state dir is.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping

from confluent_kafka import KafkaError, KafkaException, Producer, TopicCollection
from confluent_kafka.admin import NewPartitions, NewTopic

from streaming.security.certificates import common_name
from streaming.errors import JobError
from streaming.kafka.access.acls import Grant, Pattern, Resource, command_config_for
from streaming.kafka.admin import Cluster
from streaming.kafka.client_settings import client_settings
from streaming.kafka.sink.transactional_ids import TRANSACTIONAL_PREFIX
from streaming.kafka.failures import TRY_S

TIMEOUT_S = 30.0
SOURCE_TOPIC_OPERATIONS = ("READ", "DESCRIBE_CONFIGS")
SINK_TOPIC_OPERATIONS = ("CREATE", "WRITE", "READ", "ALTER")
DEAD_LETTER_OPERATIONS = ("CREATE", "WRITE")
NOT_EVEN_DESCRIBE = " (it may not even describe the topic)"

ACL_PROBE_ID = f"{TRANSACTIONAL_PREFIX}acl-check"  # what the check at start registers: no job writes with it


class PermissionRefused(JobError):
    """The principal lacks an ACL; the message names it and the command that grants it."""


def principal_of(settings: Mapping[str, str]) -> str:
    """The principal a cluster's default rules give a client with these settings: the SASL user, the CN of
    the client certificate (with ssl.principal.mapping.rules taking the CN; the whole DN by Kafka's default),
    else ANONYMOUS."""
    protocol = settings.get("security.protocol", "plaintext").lower()
    if protocol.startswith("sasl") and settings.get("sasl.username"):
        return f"User:{settings['sasl.username']}"
    if protocol == "ssl" and settings.get("ssl.certificate.location"):
        cn = common_name(settings["ssl.certificate.location"])
        return f"User:{cn}" if cn else "the client certificate's principal"
    return "User:ANONYMOUS"


@dataclass(frozen=True)
class JobAccess:
    """What one job touches: its source topics (as present now), their sinks, and its options."""

    source_topics: tuple[str, ...]
    sink_topics: tuple[str, ...]
    dead_letter_topic: str | None = None
    groups: tuple[str, ...] = ()  # the source groups offset sync will follow, as far as they are known
    sync_acls: bool = False
    one_cluster: bool = False  # source and sink are one cluster (and one principal): what READ or ALTER implies
    #                            on the sink side is not asked for again on the source side


def required_grants(access: JobAccess, source_principal: str, sink_principal: str) -> list[tuple[str, Grant]]:
    """The least ACL set for the job, by side ("source" or "sink")."""
    out = [("source", Grant(source_principal, op, Resource.TOPIC, t))
           for t in access.source_topics for op in SOURCE_TOPIC_OPERATIONS]
    out += [("sink", Grant(sink_principal, op, Resource.TOPIC, t)) for t in access.sink_topics
            for op in SINK_TOPIC_OPERATIONS]
    out.append(("sink", Grant(sink_principal, "WRITE", Resource.TRANSACTIONAL_ID, TRANSACTIONAL_PREFIX,
                              Pattern.PREFIXED)))
    if access.dead_letter_topic:
        out += [("sink", Grant(sink_principal, op, Resource.TOPIC, access.dead_letter_topic))
                for op in DEAD_LETTER_OPERATIONS]
    implied = access.one_cluster and source_principal == sink_principal
    for group in access.groups:
        if not implied:
            out.append(("source", Grant(source_principal, "DESCRIBE", Resource.GROUP, group)))
        out.append(("sink", Grant(sink_principal, "READ", Resource.GROUP, group)))
    if access.sync_acls:
        if not implied:
            out.append(("source", Grant(source_principal, "DESCRIBE", Resource.CLUSTER)))
        out.append(("sink", Grant(sink_principal, "ALTER", Resource.CLUSTER)))
    return out


class AccessCheck:
    """Asks each cluster whether the job's principal holds each grant the job needs."""

    def __init__(self, source: Cluster, sink: Cluster) -> None:
        self.source, self.sink = source, sink
        self.principal = {"source": principal_of(source.settings), "sink": principal_of(sink.settings)}

    def _refuse(self, side: str, operation: str, resource: Resource, name: str = "", why: str = "",
                fix: Grant | None = None) -> None:
        """``fix``: the grant to print, when it is wider than the one refused (a prefix)."""
        cluster = self.source if side == "source" else self.sink
        refused = Grant(self.principal[side], operation, resource, *([name] if name else []))
        raise PermissionRefused(
            f"the {side} cluster at {cluster.bootstrap_servers} does not allow {refused.principal} {operation} on "
            f"{refused.on()}{why}; grant it: "
            f"{(fix or refused).command(cluster.bootstrap_servers, command_config_for(cluster.settings))}")

    def _described(self, cluster: Cluster, topics: Iterable[str]) -> dict[str, list[str] | None]:
        """Each topic's authorized operations: [] for one the principal may not describe, None for one that
        does not exist."""
        names = sorted(set(topics))
        if not names:
            return {}
        futures = cluster.answer(lambda: cluster.admin.describe_topics(
            TopicCollection(names), include_authorized_operations=True, request_timeout=TIMEOUT_S), "topic ACLs")
        out: dict[str, list[str] | None] = {}
        for name, future in futures.items():
            try:
                d = future.result(TIMEOUT_S)
                out[name] = [op.name for op in (d.authorized_operations or [])]
            except KafkaException as exc:
                code = exc.args[0].code()
                if code == KafkaError.TOPIC_AUTHORIZATION_FAILED:
                    out[name] = []
                elif code in (KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_TOPIC):  # noqa: SLF001
                    out[name] = None
                else:
                    raise
        return out

    def named_source_topics(self, topics: Iterable[str]) -> None:
        """A named topic the principal may not describe is not in its metadata: say why, not 'missing'."""
        for name, ops in self._described(self.source, topics).items():
            if ops == []:
                self._refuse("source", "READ", Resource.TOPIC, name, NOT_EVEN_DESCRIBE)

    def before_creating(self, access: JobAccess) -> None:
        """Everything that can be asked before the sink topics exist."""
        for name, ops in self._described(self.source, access.source_topics).items():
            for op in SOURCE_TOPIC_OPERATIONS:
                if ops is not None and op not in ops:
                    self._refuse("source", op, Resource.TOPIC, name)
        outputs = _outputs(access)
        for name, ops in self._described(self.sink, outputs).items():
            if ops == []:
                self._refuse("sink", "WRITE", Resource.TOPIC, name, NOT_EVEN_DESCRIBE)
            if ops is None:
                self._may_create(name, alter="ALTER" in outputs[name])
            else:
                for op in outputs[name]:
                    if op != "CREATE" and op not in ops:
                        self._refuse("sink", op, Resource.TOPIC, name)
        if access.sink_topics:
            self._may_write_transactions()
        # the sink side first: on one cluster its grant implies the source side's
        for group in access.groups:
            self._group("sink", group, "READ")
            self._group("source", group, "DESCRIBE")
        if access.sync_acls:
            self._cluster("sink", "ALTER", " (to add ACLs to the sink topics)")
            self._cluster("source", "DESCRIBE", " (to read the source topics' ACLs)")

    def after_creating(self, access: JobAccess) -> None:
        """WRITE and READ on sink topics the job has just created."""
        outputs = _outputs(access)
        for name, ops in self._described(self.sink, outputs).items():
            for op in outputs[name]:
                if op != "CREATE" and ops is not None and op not in ops:
                    self._refuse("sink", op, Resource.TOPIC, name)

    def _may_create(self, topic: str, alter: bool) -> None:
        """Validate-only requests: the broker judges the ACL and creates nothing."""
        admin = self.sink.admin
        future = admin.create_topics([NewTopic(topic, 1, replication_factor=-1)], validate_only=True,
                                     request_timeout=TIMEOUT_S)[topic]
        if _refused(future):
            self._refuse("sink", "CREATE", Resource.TOPIC, topic)
        if alter and _refused(admin.create_partitions([NewPartitions(topic, 2)], validate_only=True,
                                                      request_timeout=TIMEOUT_S)[topic]):
            self._refuse("sink", "ALTER", Resource.TOPIC, topic, " (a sink's partitions follow its source's)")

    def _may_write_transactions(self) -> None:
        """A transactional id under the job's prefix, registered as a task registers its own: never one a job
        writes with, so a check at start fences no task of a job that is running."""
        tid = ACL_PROBE_ID
        producer = Producer(client_settings({**self.sink.settings_with_bootstrap, "transactional.id": tid}))
        try:
            producer.init_transactions(TIMEOUT_S)
        except KafkaException as exc:
            if exc.args[0].code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED:
                self._refuse("sink", "WRITE", Resource.TRANSACTIONAL_ID, tid, " (the job's transactions)",
                             Grant(self.principal["sink"], "WRITE", Resource.TRANSACTIONAL_ID, TRANSACTIONAL_PREFIX,
                                   Pattern.PREFIXED))
            raise

    def _group(self, side: str, group: str, operation: str) -> None:
        """A fresh cluster has no group coordinator until the first group request makes __consumer_offsets:
        that request and the next ones are answered NOT_COORDINATOR or COORDINATOR_LOAD_IN_PROGRESS for a
        while, as when a coordinator moves. Those are waited out (Cluster.answer), said at DEBUG as the group sync
        says them: a new cluster's coordinator loading is no news, and one that never answers is an error."""
        cluster = self.source if side == "source" else self.sink

        def described() -> list[str]:
            future = cluster.admin.describe_consumer_groups([group], include_authorized_operations=True,
                                                            request_timeout=TRY_S)[group]
            try:
                return [op.name for op in (future.result(TRY_S).authorized_operations or [])]
            except KafkaException as exc:
                if exc.args[0].code() != KafkaError.GROUP_AUTHORIZATION_FAILED:
                    raise
                return []

        ops = cluster.answer(described, f"the ACLs of consumer group {group}", quiet=True)
        if operation not in ops:
            self._refuse(side, operation, Resource.GROUP, group)

    def _cluster(self, side: str, operation: str, why: str) -> None:
        cluster = self.source if side == "source" else self.sink
        described = cluster.answer(lambda: cluster.admin.describe_cluster(
            include_authorized_operations=True, request_timeout=TIMEOUT_S).result(TIMEOUT_S), "cluster ACLs")
        if operation not in [op.name for op in (described.authorized_operations or [])]:
            self._refuse(side, operation, Resource.CLUSTER, why=why)


def _outputs(access: JobAccess) -> dict[str, tuple[str, ...]]:
    """The topics the job writes on the sink cluster, with what it needs on each."""
    outputs = {t: SINK_TOPIC_OPERATIONS for t in access.sink_topics}
    if access.dead_letter_topic:
        outputs[access.dead_letter_topic] = DEAD_LETTER_OPERATIONS
    return outputs


def _refused(future) -> bool:
    try:
        future.result(TIMEOUT_S)
    except KafkaException as exc:
        return exc.args[0].code() in (KafkaError.TOPIC_AUTHORIZATION_FAILED, KafkaError.CLUSTER_AUTHORIZATION_FAILED)
    return False
