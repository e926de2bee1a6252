"""Granting a job's least ACL set through the admin API (`kcompact run --print-acls --apply`), logged in as an
admin: what a cluster lacks is added, what it has is left, so a second run adds nothing.

A grant counts as present only as that very ACL: one that a wider ACL (ALL, the wildcard topic, a prefix)
implies is added all the same, which Kafka's authorizer takes as one more ACL that changes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from confluent_kafka import KafkaException

from streaming.errors import JobError
from streaming.kafka.access.acls import TIMEOUT_S, Grant, present_grants
from streaming.kafka.admin import Cluster
from streaming.kafka.failures import is_refused, kafka_error, reason


@dataclass(frozen=True)
class Applied:
    """What one cluster was asked for: the grants it lacked (added, unless a dry run) and those it had."""

    bootstrap_servers: str
    added: tuple[Grant, ...]
    present: tuple[Grant, ...]


def apply_grants(cluster: Cluster, grants: Sequence[Grant], dry_run: bool = False) -> Applied:
    """``cluster``: reached as an admin, who may describe and alter the cluster's ACLs."""
    wanted = list(dict.fromkeys(grants))

    def refused(what: str, exc: KafkaException) -> JobError:
        err = kafka_error(exc)  # an authorizer's refusal carries the whole request as its text: the name says it
        why = err.name() if err is not None and is_refused(exc) else reason(exc)
        return JobError(f"the {cluster.role} cluster at {cluster.bootstrap_servers} would not {what} the admin given "
                        f"with {cluster.given_with()}: {why}; the admin must be a principal that may describe and "
                        f"alter the cluster (a super user)")

    try:
        present = cluster.answer(lambda: present_grants(cluster.admin), "the cluster's ACLs")
    except KafkaException as exc:
        raise refused("list its ACLs to", exc) from exc
    missing = [g for g in wanted if g not in present]
    if missing and not dry_run:
        futures = cluster.admin.create_acls([g.binding() for g in missing], request_timeout=TIMEOUT_S)
        try:
            for future in futures.values():
                future.result(TIMEOUT_S)
        except KafkaException as exc:
            raise refused("add ACLs for", exc) from exc
    return Applied(cluster.bootstrap_servers, tuple(missing), tuple(g for g in wanted if g in present))
