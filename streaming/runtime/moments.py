"""The named moments of a job at which a node's death hurts most, and the drill that holds a job there.

A failover drill (Kafka's own system tests kill brokers at chosen points of a transaction) needs the fault
to land at a moment, not after a guess of how long the job takes to get there. Each moment is said at DEBUG
when reached. With ``KCOMPACT_HOLD_AT=MOMENT:DIR`` in the job's environment, the first process to reach
MOMENT (the driver or any Spark task) writes its process id to ``DIR/holder.pid``, then ``DIR/reached`` naming
where it is, and waits until ``DIR/release`` exists: the operator kills a node (or the holder) meanwhile, and
the held call then runs against the cluster as the fault left it. Only one process holds, once, and never longer than HOLD_LIMIT_S.
"""

from __future__ import annotations

import logging
import os
import time
from enum import Enum
from pathlib import Path

log = logging.getLogger(__name__)

HOLD_ENV = "KCOMPACT_HOLD_AT"
HOLD_LIMIT_S = 300.0
REACHED = "reached"
RELEASE = "release"
HOLDER = "holder.pid"  # the holding process's id, written before REACHED says where: a drill may stop or kill it
CLAIMED = "claimed"  # made by the first process to reach the moment: the others pass


class Moment(Enum):
    FIRST_BATCH = "first-batch"              # the driver, as the run's first micro-batch starts (before its read)
    LOG_START = "log-start"                  # a source task, before it asks the leader for its log start
    FETCH = "fetch"                          # a source task, after its first records and before the rest
    APPEND = "append"                        # an append task, its records read and not yet in the log
    BEFORE_CLEAN = "before-clean"            # the driver, the batch appended and its compaction stage not begun
    CLEANED = "cleaned"                      # a compaction task, a log's passes made and not yet committed
    INIT_TRANSACTIONS = "init-transactions"  # an emitter, before its producer's init_transactions
    FLUSH = "flush"                          # an emitter, its records produced and not yet acknowledged
    COMMIT = "commit"                        # an emitter, its records acknowledged and the transaction not committed
    LOG_COMMIT = "log-commit"                # a compaction task, its emission done and its logs' passes and notes not
    GROUP_SYNC_COMMIT = "group-sync-commit"  # the group sync, before it commits a group's offsets on the sink
    SNAPSHOT_COMMIT = "snapshot-commit"      # an Iceberg snapshot, its data files written and its commit not made
    OPEN_TRANSACTIONS = "open-transactions"  # a promote, its source fenced, transactions open there, before its cut


def reached(moment: Moment, where: str) -> None:
    """Say that ``moment`` is reached at ``where`` (a partition, a group), and hold there if a drill asks."""
    log.debug("moment: %s at %s", moment.value, where)
    hold = os.environ.get(HOLD_ENV)
    if hold and hold.partition(":")[0] == moment.value:
        _hold(Path(hold.partition(":")[2]), moment, where)


def _hold(directory: Path, moment: Moment, where: str) -> None:
    try:
        os.close(os.open(directory / CLAIMED, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
    except FileExistsError:  # another process, or this one earlier, held already
        return
    (directory / HOLDER).write_text(str(os.getpid()))
    (directory / f"{REACHED}.{os.getpid()}").write_text(where)
    os.replace(directory / f"{REACHED}.{os.getpid()}", directory / REACHED)  # whole, and after the holder's id
    log.warning("holding at %s of %s until %s exists", moment.value, where, directory / RELEASE)
    deadline = time.monotonic() + HOLD_LIMIT_S
    while not (directory / RELEASE).exists() and time.monotonic() < deadline:
        time.sleep(0.02)
