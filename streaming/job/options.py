"""How one run of the job goes, given once at start and handed down whole: what it reads and where it starts,
whether it ends after one pass, how long it waits for a cluster, and the schedules beside it."""

from __future__ import annotations

from dataclasses import dataclass

from streaming.job.acl_sync import AclSyncSchedule
from streaming.job.group_sync import GroupSyncSchedule
from streaming.kafka.subscription import StartingOffsets


@dataclass(frozen=True)
class RunOptions:
    once: bool = False  # read what is there now, then end (Spark's availableNow)
    drain: bool = False  # with once: roll every active segment before the last stage
    checkpoint_location: str | None = None  # None: the state dir's own
    max_offsets_per_trigger: int | None = None
    starting_offsets: StartingOffsets = StartingOffsets()
    retry_timeout_s: float = 300.0  # how long a cluster that is away is waited for, from the last progress
    allow_data_loss: bool = False
    live_progress: bool = False  # refresh the progress line in place (a terminal)


@dataclass(frozen=True)
class Schedules:
    """The syncs that run beside the job on the driver, each on its own interval; None: not asked for."""

    group_sync: GroupSyncSchedule | None = None
    acl_sync: AclSyncSchedule | None = None
