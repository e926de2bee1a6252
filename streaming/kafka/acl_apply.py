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
from streaming.kafka.acls import TIMEOUT_S, Grant, present_grants
from streaming.kafka.admin import Cluster
from streaming.kafka.failures import reason


@dataclass(frozen=True)
class Applied:
    """What one cluster was asked for: the grants it lacked (added, unless a dry run) and those it had."""

    bootstrap_servers: str
    added: tuple[Grant, ...]
    present: tuple[Grant, ...]


def apply_grants(cluster: Cluster, grants: Sequence[Grant], dry_run: bool = False) -> Applied:
    """``cluster``: reached as an admin, who may describe and alter the cluster's ACLs."""
    wanted = list(dict.fromkeys(grants))
    cannot = (f"the {cluster.role} cluster at {cluster.bootstrap_servers} refused the admin given with "
              f"{cluster.given_with()}")
    try:
        present = cluster.answer(lambda: present_grants(cluster.admin), "the cluster's ACLs")
    except KafkaException as exc:
        raise JobError(f"{cannot} the list of its ACLs: {reason(exc)}; it must log in as a principal that may "
                       f"describe and alter the cluster (a super user)") from exc
    missing = [g for g in wanted if g not in present]
    if missing and not dry_run:
        futures = cluster.admin.create_acls([g.binding() for g in missing], request_timeout=TIMEOUT_S)
        try:
            for future in futures.values():
                future.result(TIMEOUT_S)
        except KafkaException as exc:
            raise JobError(f"{cannot} new ACLs: {reason(exc)}") from exc
    return Applied(cluster.bootstrap_servers, tuple(missing), tuple(g for g in wanted if g in present))
