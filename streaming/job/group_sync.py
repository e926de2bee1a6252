"""Group offset sync while the job runs (--sync-group-offsets): a round every interval on a thread of the
driver, over the topics the job mirrors at that moment. A round that fails (a cluster away, a group
refused) is said in one line and tried again at the next interval: the job itself goes on."""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Mapping

from streaming.utc import Outage
from streaming.job.periodic import every
from streaming.job.spec import TopicPlan
from streaming.kafka.failures import reason
from streaming.kafka.groups.group_sync import GroupOffsetSync, GroupSyncTotals, MirroredTopic, SyncRound

log = logging.getLogger(__name__)


def mirrored(plans: Mapping[str, TopicPlan]) -> list[MirroredTopic]:
    return [MirroredTopic(p.source, p.sink, p.partitions) for _, p in sorted(plans.items())]


@dataclass
class GroupSyncSchedule:
    syncer: GroupOffsetSync
    interval_s: float
    totals: GroupSyncTotals

    outage: Outage = field(default_factory=Outage)  # since the first of the rounds failed since one succeeded

    def round(self, plans: Mapping[str, TopicPlan]) -> SyncRound | None:
        try:
            done = self.syncer.sync(mirrored(plans))
        except Exception as exc:  # noqa: BLE001 (the sync is beside the job: it must not stop it)
            log.warning("consumer group offset sync waiting %s, tried again every %.0fs: %s",
                        self.outage.failed(int(time.time() * 1000)), self.interval_s, reason(exc))
            return None
        self.outage.ended()
        self.totals.add(done)
        if done.offsets_moved:
            log.info("consumer group offset sync: %d offsets of %d groups committed on the sink",
                     done.offsets_moved, len(done.groups_synced))
        return done

    def start(self, stop: threading.Event, plans: Callable[[], Mapping[str, TopicPlan]]) -> threading.Thread:
        return every(self.interval_s, stop, "group-offset-sync", lambda: self.round(plans()))
