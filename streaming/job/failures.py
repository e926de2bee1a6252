"""The job's failures as its user reads them: which mean something to change (a refusal, a full disk, a
missing filesystem, records deleted before they were read), how a stage's failures are said, what an empty
--once run says, and how long the job waits before it restarts its query."""

from __future__ import annotations

import errno
import logging
import re
import time
from dataclasses import dataclass

from streaming.errors import JobError
from streaming.job.compact import StageReport
from streaming.job.task_error import ErrorKind
from streaming.kafka.failures import is_refused
from streaming.partition_id import PartitionId
from streaming.utc import Outage, utc_text

log = logging.getLogger(__name__)

DISK_FULL = "No space left on device"


def state_dir_full(state_dir: str) -> JobError:
    return JobError(f"the state dir {state_dir} is full ({DISK_FULL}). Free space or move --state-dir, then "
                    f"start again: every change to a log is committed whole or not at all, and the "
                    f"interrupted micro-batch is replayed from the Spark checkpoint, so nothing is lost or doubled")


def explain_failure(exc: BaseException, state_dir: str) -> JobError | None:
    """A clear, one-line error for failures with a known cause. Spark hands task failures to the driver
    as text (the worker's traceback inside a Java exception), so the cause is recognised by its message."""
    text = str(exc)
    if isinstance(exc, OSError) and exc.errno == errno.ENOSPC or DISK_FULL in text:
        return state_dir_full(state_dir)
    if is_refused(exc):
        return JobError(f"a cluster refused the compactor: {telling_line(exc)}. Check the security settings "
                        f"given with --kafka (source) and --sink-kafka (sink)")
    missing = re.search(r'No FileSystem for scheme "?(\w+)|checkpoint file manager for path=(\w+)://', text)
    if missing:
        return JobError(f"Spark has no filesystem for {missing[1] or missing[2]}:// to keep its checkpoint in: "
                        f"add the store's Hadoop connector with --spark-conf spark.jars.packages=... (s3a: "
                        f"org.apache.hadoop:hadoop-aws:<Spark's Hadoop version>) or give --checkpoint-location")
    native = re.search(r"(?:NativePathError|HandleNotFound): ([^\n]*)", text)
    if native:
        return JobError(f"kcompact's native Kafka path failed: {native[1]}")
    lost = re.search(r"DataLossError: (partition \S+: [^.\n]*)", text)
    if lost:
        return JobError(f"source {lost[1]}: those records were deleted from the source (retention) before "
                        f"kcompact read them. Start with --allow-data-loss to go on from the log start")
    return None


class StageFailures:
    """Says a stage's failures. A lasting failure is a line per partition, to be acted on. Passing ones (the
    sink cluster away, below min.insync.replicas, a leader moving) are one line per stage whatever the
    number of partitions, saying since when the sink has kept partitions from emitting: the job waits,
    nothing is lost, and the next trigger tries again."""

    def __init__(self) -> None:
        self.sink = Outage()
        self.refused: dict[PartitionId, str] = {}  # a record too big for its sink, said once while it lasts

    def report(self, reports: list[StageReport], now_ms: int) -> None:
        # a transaction open on a sink partition is said where it is resolved (job.sink_watch), a stage whose
        # tasks died where it ran (job.compaction_stages), each once
        reports = [r for r in reports
                   if not (r.error and r.error.kind in (ErrorKind.OPEN_TRANSACTION, ErrorKind.TASK_LOST))]
        fenced = [r for r in reports if r.error and r.error.kind is ErrorKind.FENCED]
        if fenced:
            log.warning("%d partitions were taken over by another writer of their log or sink (a later attempt of "
                        "their task; %s: %s): they run again from what was committed", len(fenced), fenced[0].pid,
                        fenced[0].error.message.splitlines()[0][:200])
        waiting = [r for r in reports if r.error and r.error.transient and r.error.kind is not ErrorKind.FENCED]
        for r in reports:
            if r.error and r.error.kind is ErrorKind.RECORD_TOO_LARGE:
                if self.refused.get(r.pid) != r.error.message:
                    log.error("partition %s: %s", r.pid, r.error)
                self.refused[r.pid] = r.error.message
            elif r.error and r not in waiting and r not in fenced:
                log.error("partition %s: %s", r.pid, r.error)
            if r.error is None or r.error.kind is not ErrorKind.RECORD_TOO_LARGE:
                self.refused.pop(r.pid, None)
        if not waiting:
            self.sink.ended()
            return
        first = waiting[0]
        log.warning("waiting for the sink cluster %s: %d of %d partitions could not emit (%s: %s); nothing is "
                    "lost, the next trigger tries again", self.sink.failed(now_ms), len(waiting), len(reports),
                    first.pid, first.error.message.splitlines()[0][:200])


def nothing_cleanable(reports: list[StageReport], now_ms: int, drained: bool = False) -> str | None:
    """Why a run emitted nothing when nothing was cleanable yet, when the first record will be, and the fix."""
    waiting = sorted((r for r in reports if r.waiting), key=lambda r: r.waiting.earliest_ms)
    if not waiting:
        return None
    first = waiting[0]
    nc = first.waiting
    latest = "" if nc.latest_ms is None else f", at the latest from {utc_text(nc.latest_ms)} UTC (max.compaction.lag.ms)"
    ratio = " once the dirty ratio passes min.cleanable.dirty.ratio" if nc.earliest_ms <= now_ms else ""
    return (f"nothing emitted: nothing is cleanable yet in {len(waiting)} partition(s). The first to become "
            f"eligible is {first.pid} from offset {nc.offset}: from {utc_text(nc.earliest_ms)} UTC"
            f"{ratio} (its segment rolls by segment.ms / max.compaction.lag.ms, then min.compaction.lag.ms)"
            f"{latest}. kcompact status shows each partition's time"
            f"{'' if drained else '; --drain (with --once) rolls the active segments now and cleans what they hold'}")


def telling_line(exc: BaseException) -> str:
    """The line of a failure that says most: the last one naming a Kafka error or an Error (a Java exception's
    text ends with its innermost cause; its stack frames, "at ...", say nothing), else its first line; at most
    300 characters."""
    lines = [line for line in str(exc).splitlines() if ("KafkaError{" in line or "Error" in line)
             and not line.lstrip().startswith("at ")]
    return (lines[-1] if lines else str(exc).splitlines()[0] if str(exc) else type(exc).__name__).strip()[:300]


@dataclass
class Restarts:
    """Exponential pauses between retries, given up once no progress was made for timeout_s."""

    timeout_s: float
    progress: int | None = None
    since: float = 0.0
    attempt: int = 0

    def next_pause(self, progress: int) -> float | None:
        now = time.monotonic()
        if progress != self.progress:
            self.progress, self.since, self.attempt = progress, now, 0
        if now - self.since > self.timeout_s:
            return None
        self.attempt += 1
        return min(30.0, 2.0 ** (self.attempt - 1))
