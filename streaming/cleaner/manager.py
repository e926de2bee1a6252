"""Choosing and cleaning partitions (Kafka's LogCleanerManager), with retries where Kafka gives up.

A partition whose pass fails is marked uncleanable and skipped until log.cleaner.backoff.ms has passed,
then retried; the other partitions go on. (Kafka keeps it uncleanable until the broker restarts.) A pass
fenced by another writer of the log, or stopped by a full disk, is no fault of the log: it is raised, not
marked, so the job stops on a full disk and cleans at once when it starts again with room.
"""

from __future__ import annotations

import errno
import logging

from streaming.cleaner.cleaner import Cleaner, DeadLetterFenced, DeadLetterSink
from streaming.cleaner.config import CompactionConfig, KeylessPolicy
from streaming.cleaner.metrics import PartitionOutcome
from streaming.partition_id import PartitionId
from streaming.cleaner.partition_state import PartitionCleanerState
from streaming.cleaner.selection import LogToClean, log_to_clean
from streaming.log.manifest import LogFencedError
from streaming.log.partition_log import PartitionLog
from streaming.log.segment import CorruptSegmentError

log = logging.getLogger(__name__)


class LogCleanerManager:
    def __init__(self, config: CompactionConfig, cleaner: Cleaner | None = None) -> None:
        self.config = config
        self.cleaner = cleaner or Cleaner(config)

    def select(self, plog: PartitionLog, pid: PartitionId, now_ms: int) -> LogToClean:
        return log_to_clean(plog.segments, pid, plog.cleaner_checkpoint, self.config, now_ms)

    def clean_partition(self, pid: PartitionId, plog: PartitionLog, now_ms: int,
                        dead_letter: DeadLetterSink | None = None, emitted_up_to: int | None = None
                        ) -> PartitionOutcome:
        """Clean one partition if it is eligible and not backing off; never raises for a failed pass.
        ``emitted_up_to``: how far the sink has committed the log (Cleaner.clean)."""
        state = PartitionCleanerState.load(plog)
        target = self.select(plog, pid, now_ms)
        if state.in_backoff(now_ms):
            return PartitionOutcome(target, state, skipped_backoff=True)
        if plog.damaged:  # found on open: no pass can read it, whatever the dirty ratio
            damage = "; ".join(f"{name}: {what}" for name, what in sorted(plog.damaged.items()))
            return self._uncleanable(pid, plog, target, state, now_ms,
                                     CorruptSegmentError(f"damaged segments in {plog.dir}: {damage}"))
        if not target.eligible(self.config.min_cleanable_dirty_ratio):
            return PartitionOutcome(target, state)
        try:
            result = self.cleaner.clean(plog, target, now_ms, dead_letter, emitted_up_to)
        except (LogFencedError, DeadLetterFenced):
            raise
        except OSError as exc:
            if exc.errno == errno.ENOSPC:
                raise
            return self._uncleanable(pid, plog, target, state, now_ms, exc)
        except Exception as exc:  # noqa: BLE001 (any other failure: mark this partition, keep the others going)
            return self._uncleanable(pid, plog, target, state, now_ms, exc)
        state.passes += 1
        state.last_clean_ms = now_ms
        state.uncleanable_since_ms = state.uncleanable_error = state.retry_at_ms = None
        state.keyless_records += result.keyless
        state.dead_letter_records += result.keyless if self.config.keyless_policy is KeylessPolicy.DEAD_LETTER else 0
        state.invalid_version_headers += result.invalid_version_headers
        state.tombstones_removed += result.tombstones_removed
        state.save(plog)
        return PartitionOutcome(target, state, result=result)

    def _uncleanable(self, pid: PartitionId, plog: PartitionLog, target: LogToClean, state: PartitionCleanerState,
                     now_ms: int, exc: Exception) -> PartitionOutcome:
        log.error("cleaning %s failed; uncleanable, retry in %d ms: %s", pid, self.config.backoff_ms, exc)
        if state.uncleanable_since_ms is None:
            state.uncleanable_since_ms = now_ms
        state.uncleanable_error = f"{type(exc).__name__}: {exc}"
        state.retry_at_ms = now_ms + self.config.backoff_ms
        state.save(plog)
        return PartitionOutcome(target, state, error=state.uncleanable_error, cause=exc)
