"""Topic ACL sync while the job runs (--sync-topic-acls): a round at start and then every interval, over
the topics the job mirrors at that moment. A round that fails is said in one line and tried again at the
next interval: the job itself goes on (its own ACLs were checked at start)."""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from typing import Callable, Mapping

from streaming.job.periodic import every
from streaming.job.spec import TopicPlan
from streaming.kafka.access.acl_sync import TopicAclSync
from streaming.kafka.failures import reason

log = logging.getLogger(__name__)


def sinks_of(plans: Mapping[str, TopicPlan]) -> dict[str, str]:
    return {p.source: p.sink for p in plans.values()}


@dataclass
class AclSyncSchedule:
    syncer: TopicAclSync
    interval_s: float

    def round(self, plans: Mapping[str, TopicPlan]) -> None:
        try:
            self.syncer.sync(sinks_of(plans))
        except Exception as exc:  # noqa: BLE001 (the sync is beside the job: it must not stop it)
            log.warning("topic ACL sync failed, to be tried again in %.0fs: %s", self.interval_s, reason(exc))

    def start(self, stop: threading.Event, plans: Callable[[], Mapping[str, TopicPlan]]) -> threading.Thread:
        return every(self.interval_s, stop, "topic-acl-sync", lambda: self.round(plans()))
