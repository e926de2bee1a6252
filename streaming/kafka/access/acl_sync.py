"""Topic ACL sync, as MirrorMaker 2 does it (sync.topic.acls.enabled): whoever may read a mirrored source
topic may read its sink topic.

Each ALLOW ACL on topics of the source cluster that applies to a mirrored topic (literal on its name, the
literal wildcard '*', or prefixed on a prefix of its name) and grants READ, DESCRIBE or ALL is added to the
sink cluster as a literal ACL on the sink topic, for the same principal and host, with ALL downgraded to READ;
the mirror's own principals' ACLs are not copied (it reads the source to copy it). WRITE is never copied (nor ALL as ALL): the sink is written by the mirror only. ACLs are only ever added: one
removed on the source stays on the sink until an operator removes it, as with MirrorMaker 2.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Mapping

from confluent_kafka import KafkaException

from streaming.kafka.access.acls import TIMEOUT_S, Grant, Pattern, Resource, topic_grants
from streaming.kafka.admin import Cluster
from streaming.kafka.failures import reason

log = logging.getLogger(__name__)

COPIED = {"READ": "READ", "DESCRIBE": "DESCRIBE", "ALL": "READ"}
WILDCARD = "*"


class AclSyncError(RuntimeError):
    """The ACLs could not be read or added; the message names the cluster and why."""


def _applies(grant: Grant, topic: str) -> bool:
    if grant.pattern == Pattern.PREFIXED:
        return topic.startswith(grant.name)
    return grant.name in (topic, WILDCARD)


def sink_grants(source_grants: list[Grant], sinks: Mapping[str, str],
                mirror_principals: frozenset[str] = frozenset()) -> list[Grant]:
    """The sink ACLs that the source's topic ACLs call for; ``sinks`` maps each mirrored topic to its sink.
    The mirror's own principals read the source to copy it, not to read the copy: theirs are not copied."""
    wanted = {Grant(g.principal, COPIED[g.operation], Resource.TOPIC, sink, Pattern.LITERAL, g.host)
              for g in source_grants if g.resource == Resource.TOPIC and g.operation in COPIED
              and g.principal not in mirror_principals
              for topic, sink in sinks.items() if _applies(g, topic)}
    return sorted(wanted, key=lambda g: (g.name, g.principal, g.operation, g.host))


@dataclass
class TopicAclSync:
    source: Cluster
    sink: Cluster
    mirror_principals: frozenset[str] = frozenset()  # the job's own, whose ACLs are never copied

    def missing(self, sinks: Mapping[str, str]) -> list[Grant]:
        """The sink ACLs the sync would add now."""
        try:
            wanted = sink_grants(self._grants(self.source), sinks, self.mirror_principals)
            present = set(self._grants(self.sink))
        except KafkaException as exc:
            raise AclSyncError(f"cannot read topic ACLs: {reason(exc)}") from exc
        return [g for g in wanted if g not in present]

    def sync(self, sinks: Mapping[str, str]) -> list[Grant]:
        """Add what is missing; what was added."""
        added = self.missing(sinks)
        if added:
            futures = self.sink.admin.create_acls([g.binding() for g in added], request_timeout=TIMEOUT_S)
            try:
                for f in futures.values():
                    f.result(TIMEOUT_S)
            except KafkaException as exc:
                raise AclSyncError(f"cannot add ACLs on the sink cluster {self.sink.bootstrap_servers}: "
                                   f"{reason(exc)}") from exc
            for g in added:
                log.info("topic ACL sync: allowed %s %s on %s", g.principal, g.operation, g.on())
        return added

    @staticmethod
    def _grants(cluster: Cluster) -> list[Grant]:
        return cluster.answer(lambda: topic_grants(cluster.admin), "topic ACLs")
