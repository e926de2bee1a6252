"""Kafka's access control as values: a grant (one ALLOW ACL), and adding, removing and listing grants and
SCRAM users with an admin client.

A grant is written the way operators read ACLs: ``kafka-acls.sh`` options, which the README and the job's
refusals print, and the same value converts to confluent-kafka's AclBinding for the admin API.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import Enum
from typing import Iterable, Mapping

from confluent_kafka import KafkaException
from confluent_kafka.admin import (AclBinding, AclBindingFilter, AclOperation, AclPermissionType, AdminClient,
                                   ResourcePatternType, ResourceType, ScramCredentialInfo, ScramMechanism,
                                   UserScramCredentialUpsertion)

from streaming.kafka.client_settings import client_settings

TIMEOUT_S = 30.0
SCRAM_ITERATIONS = 8192


class Resource(str, Enum):
    TOPIC = "topic"
    GROUP = "group"
    TRANSACTIONAL_ID = "transactional-id"
    CLUSTER = "cluster"


class Pattern(str, Enum):
    LITERAL = "literal"
    PREFIXED = "prefixed"


_RESOURCE = {Resource.TOPIC: ResourceType.TOPIC, Resource.GROUP: ResourceType.GROUP,
             Resource.TRANSACTIONAL_ID: ResourceType.TRANSACTIONAL_ID, Resource.CLUSTER: ResourceType.BROKER}
_PATTERN = {Pattern.LITERAL: ResourcePatternType.LITERAL, Pattern.PREFIXED: ResourcePatternType.PREFIXED}
CLUSTER_NAME = "kafka-cluster"  # the one cluster resource's name
ADMIN_CONFIG_PLACEHOLDER = "ADMIN.properties"  # in a printed command: the admin's client properties go there


@dataclass(frozen=True)
class Grant:
    """ALLOW ``principal`` to do ``operation`` (Kafka's name: READ, WRITE, DESCRIBE, ...) on a resource; or, with
    ``deny``, DENY it (a promote's fence of the source's writers)."""

    principal: str
    operation: str
    resource: Resource
    name: str = CLUSTER_NAME
    pattern: Pattern = Pattern.LITERAL
    host: str = "*"
    deny: bool = False

    def on(self) -> str:
        """The resource as people say it: ``topic orders``, ``topics prefixed orders.``, ``the cluster``."""
        if self.resource == Resource.CLUSTER:
            return "the cluster"
        kind = self.resource.value.replace("-", " ")
        return f"{kind}s prefixed {self.name!r}" if self.pattern == Pattern.PREFIXED else f"{kind} {self.name!r}"

    def command(self, bootstrap: str = "BOOTSTRAP", command_config: str | None = None) -> str:
        """The kafka-acls.sh command that adds it; ``command_config``: the admin's client properties, which a
        secured listener needs (command_config_for)."""
        where = "--cluster" if self.resource == Resource.CLUSTER else f"--{self.resource.value} '{self.name}'"
        pattern = " --resource-pattern-type prefixed" if self.pattern == Pattern.PREFIXED else ""
        host = "" if self.host == "*" else f" --allow-host {self.host}"
        config = f" --command-config {command_config}" if command_config else ""
        return (f"kafka-acls.sh --bootstrap-server {bootstrap}{config} --add --allow-principal {self.principal}{host} "
                f"--operation {self.operation.title().replace('_', '')} {where}{pattern}")

    def for_principal(self, principal: str) -> "Grant":
        return replace(self, principal=principal)

    def binding(self) -> AclBinding:
        return AclBinding(_RESOURCE[self.resource], self.name, _PATTERN[self.pattern], self.principal, self.host,
                          AclOperation[self.operation], AclPermissionType.DENY if self.deny else AclPermissionType.ALLOW)

    @classmethod
    def of_binding(cls, b: AclBinding) -> "Grant":
        resource = next(r for r, t in _RESOURCE.items() if t == b.restype)
        pattern = Pattern.PREFIXED if b.resource_pattern_type == ResourcePatternType.PREFIXED else Pattern.LITERAL
        return cls(b.principal, b.operation.name, resource, b.name, pattern, b.host,
                   b.permission_type == AclPermissionType.DENY)


def command_config_for(settings: Mapping[str, str], given: str | None = None) -> str | None:
    """What a printed kafka-acls.sh command passes as --command-config: the admin's file when one was given;
    else, for a cluster reached over a secured listener (whose ACL commands need an admin's login), a name to
    put one's own in place of."""
    if given:
        return given
    secured = settings.get("security.protocol", "plaintext").lower() != "plaintext"
    return ADMIN_CONFIG_PLACEHOLDER if secured else None


def _admin(bootstrap_servers: str, settings: Mapping[str, str]) -> AdminClient:
    return AdminClient(client_settings({"bootstrap.servers": bootstrap_servers, **settings}))


def _wait(futures: Mapping | Iterable, what: str) -> None:
    items = futures.values() if isinstance(futures, Mapping) else futures
    for f in items:
        try:
            f.result(TIMEOUT_S)
        except KafkaException as exc:
            raise RuntimeError(f"{what}: {exc.args[0].str()}") from exc


def add_grants(bootstrap_servers: str, grants: Iterable[Grant], settings: Mapping[str, str] | None = None) -> None:
    bindings = [g.binding() for g in grants]
    if bindings:
        admin = _admin(bootstrap_servers, settings or {})  # held until the answers are in
        _wait(admin.create_acls(bindings, request_timeout=TIMEOUT_S), "adding ACLs")


def remove_grants(bootstrap_servers: str, grants: Iterable[Grant], settings: Mapping[str, str] | None = None) -> None:
    filters = [AclBindingFilter(b.restype, b.name, b.resource_pattern_type, b.principal, b.host, b.operation,
                                b.permission_type) for b in (g.binding() for g in grants)]
    if filters:
        admin = _admin(bootstrap_servers, settings or {})
        _wait(admin.delete_acls(filters, request_timeout=TIMEOUT_S), "removing ACLs")


def present_grants(admin: AdminClient) -> set[Grant]:
    """Every ALLOW ACL of the cluster, on any resource; needs DESCRIBE on the cluster."""
    flt = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
                           AclPermissionType.ALLOW)
    return {Grant.of_binding(b) for b in admin.describe_acls(flt, request_timeout=TIMEOUT_S).result(TIMEOUT_S)
            if b.restype in _RESOURCE.values()}


def topic_grants(admin: AdminClient) -> list[Grant]:
    """Every ALLOW ACL on topics (literal and prefixed); needs DESCRIBE on the cluster."""
    flt = AclBindingFilter(ResourceType.TOPIC, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
                           AclPermissionType.ALLOW)
    return [Grant.of_binding(b) for b in admin.describe_acls(flt, request_timeout=TIMEOUT_S).result(TIMEOUT_S)]


def grants_of(bootstrap_servers: str, settings: Mapping[str, str] | None = None) -> list[Grant]:
    """Every ALLOW ACL on topics of a cluster."""
    admin = _admin(bootstrap_servers, settings or {})
    return topic_grants(admin)


def upsert_scram_user(bootstrap_servers: str, user: str, password: str,
                      settings: Mapping[str, str] | None = None) -> None:
    """A SCRAM-SHA-512 login for ``user`` (made, or its password changed)."""
    upsertion = UserScramCredentialUpsertion(user, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512,
                                                                       SCRAM_ITERATIONS), password.encode())
    admin = _admin(bootstrap_servers, settings or {})
    _wait(admin.alter_user_scram_credentials([upsertion]), f"making SCRAM user {user}")
