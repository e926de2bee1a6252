"""Where things live in the state directory: the one owner of every name in it.

    kcompact.json      the job's settings (secrets redacted), for status and dump while the job is down
    metrics.json       the last trigger's metrics document
    switch.json        a promote's or failover's report: while present, the job does not mirror again
    failback.json      (a reverse mirror's) the diverged tail its failback settled, and the failback's report
    .lock              one compactor per state dir (local dirs)
    checkpoint/        Spark's streaming checkpoint
    logs/TOPIC-P/      one partition log (its manifests/ and segments/ are the log's own), plus:
        cleaner-state.json  the cleaner's memory of the partition, as a kcompact before 2026-12 kept it (read
                       only; it is a mark of the log's manifest now: streaming.cleaner.partition_state)
        emitted.json   the last emission progress the sink confirmed (a hint: the sink decides), as a kcompact
                       before 2026-12 kept it (read only; a manifest mark now: streaming.job.emission_note)
        rejected/      records the log could not store, one object per append that had any
        .writer.lock   one writer task per partition log (local dirs; object stores fence by manifest)
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from urllib.parse import urlparse

from streaming.partition_id import PartitionId
from streaming.log import LogConfig, PartitionLog
from streaming.log.read_keep import ReadKeep
from streaming.log.storage import Barrier
from streaming.state.stores import StateDir

LOGS = "logs"
JOB_FILE = "kcompact.json"
METRICS_FILE = "metrics.json"
SINK_ENDS_FILE = "sink-ends.json"
OPEN_TRANSACTIONS_FILE = "open-transactions.json"
TRANSACTIONAL_SLOTS_FILE = "transactional-slots.json"
SWITCH_FILE = "switch.json"
FAILBACK_FILE = "failback.json"
REJECTED = "rejected"
# Spark's own filesystems (Hadoop's) name some stores differently from pyarrow
_HADOOP_SCHEMES = {"s3": "s3a", "gcs": "gs"}


def job_file(state: StateDir) -> str:
    return state.path(JOB_FILE)


def metrics_file(state: StateDir) -> str:
    return state.path(METRICS_FILE)


def sink_ends_file(state: StateDir) -> str:
    return state.path(SINK_ENDS_FILE)


def open_transactions_file(state: StateDir) -> str:
    return state.path(OPEN_TRANSACTIONS_FILE)


def transactional_slots_file(state: StateDir) -> str:
    return state.path(TRANSACTIONAL_SLOTS_FILE)


def switch_file(state: StateDir) -> str:
    return state.path(SWITCH_FILE)


def failback_file(state: StateDir) -> str:
    return state.path(FAILBACK_FILE)


def state_lock_file(state: StateDir) -> str:
    return state.path(".lock")


CHECKPOINT = "checkpoint"


def spark_checkpoint(state: StateDir) -> str:
    """Spark's checkpoint beside the logs, named as Spark's Hadoop filesystems name the store."""
    if state.local:
        return checkpoint_dir(state)
    u = urlparse(state.uri)
    return f"{_HADOOP_SCHEMES.get(u.scheme, u.scheme)}://{u.netloc}{u.path.rstrip('/')}/{CHECKPOINT}"


def checkpoint_dir(state: StateDir) -> str:
    """The same directory, as the state dir's own storage names it."""
    return state.path(CHECKPOINT)


def log_dir(state: StateDir, topic: str, partition: int) -> str:
    return state.path(LOGS, f"{topic}-{partition}")


@dataclass(frozen=True)
class LogDir:
    """One partition log of the state dir: the source partition it holds and the directory it lives in."""

    pid: PartitionId
    directory: str

    @classmethod
    def of(cls, state: StateDir, pid: PartitionId) -> "LogDir":
        return cls(pid, log_dir(state, pid.topic, pid.partition))


def emitted_file(directory: str) -> str:
    return posixpath.join(directory, "emitted.json")


def rejected_file(directory: str, first_offset: int) -> str:
    """Named by the append's first offset: a replayed append rewrites the same object, never adds one."""
    return posixpath.join(directory, REJECTED, f"{first_offset:020d}.jsonl")


def writer_lock_file(directory: str) -> str:
    return posixpath.join(directory, ".writer.lock")


def list_log_dirs(state: StateDir) -> list[LogDir]:
    """Every partition log under the state directory."""
    out = []
    for name in state.storage.subdirs(state.path(LOGS)):
        pid = PartitionId.from_name(name)
        if pid is not None:
            out.append(LogDir(pid, state.path(LOGS, name)))
    return out


def open_partition_log(state: StateDir, log_dir: LogDir, config: LogConfig, barrier: Barrier | None = None,
                       keep: ReadKeep | None = None) -> PartitionLog:
    """Every task opens a partition log this way, so its segment.jitter.ms draw is the same wherever the
    task runs: the seed is the topic-partition, not the path or the process. A local log fsyncs each object
    before an append returns (LogConfig.fsync), or makes it durable with the task's ``barrier``; a remote one
    is durable when the store acknowledges. ``keep``: a compaction task's (PartitionLog)."""
    return PartitionLog(log_dir.directory, config, None if state.local else state.storage,
                        jitter_seed=str(log_dir.pid), barrier=barrier, keep=keep)
