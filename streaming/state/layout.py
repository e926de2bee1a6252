"""Where things live in the state directory: the one owner of every name in it.

    kcompact.json      the job's settings (secrets redacted), for status and dump while the job is down
    metrics.json       the last trigger's metrics document
    .lock              one compactor per state dir
    checkpoint/        Spark's streaming checkpoint
    logs/TOPIC-P/      one partition log (its segments and cleaner files are the log's own), plus:
        emitted.json   the last emission progress the sink confirmed (a hint: the sink decides)
        rejected.jsonl records the log could not store
        .writer.lock   one writer task per partition log
"""

from __future__ import annotations

import os
import re

from streaming.log import LogConfig, PartitionLog

LOGS = "logs"
JOB_FILE = "kcompact.json"
METRICS_FILE = "metrics.json"
REJECTED_FILE = "rejected.jsonl"
_LOG_DIR = re.compile(r"^(?P<topic>.+)-(?P<partition>\d+)$")


def job_file(state_dir: str) -> str:
    return os.path.join(state_dir, JOB_FILE)


def metrics_file(state_dir: str) -> str:
    return os.path.join(state_dir, METRICS_FILE)


def state_lock_file(state_dir: str) -> str:
    return os.path.join(state_dir, ".lock")


def spark_checkpoint(state_dir: str) -> str:
    return os.path.join(state_dir, "checkpoint")


def log_dir(state_dir: str, topic: str, partition: int) -> str:
    return os.path.join(state_dir, LOGS, f"{topic}-{partition}")


def emitted_file(directory: str) -> str:
    return os.path.join(directory, "emitted.json")


def rejected_file(directory: str) -> str:
    return os.path.join(directory, REJECTED_FILE)


def writer_lock_file(directory: str) -> str:
    return os.path.join(directory, ".writer.lock")


def list_log_dirs(state_dir: str) -> list[tuple[str, int, str]]:
    """(topic, partition, directory) of every partition log under the state directory."""
    root = os.path.join(state_dir, LOGS)
    if not os.path.isdir(root):
        return []
    out = []
    for name in sorted(os.listdir(root)):
        m = _LOG_DIR.match(name)
        if m and os.path.isdir(os.path.join(root, name)):
            out.append((m["topic"], int(m["partition"]), os.path.join(root, name)))
    return out


def open_partition_log(directory: str, topic: str, partition: int, config: LogConfig) -> PartitionLog:
    """Every task opens a partition log this way, so its segment.jitter.ms draw is the same wherever the
    task runs: the seed is the topic-partition, not the path or the process."""
    return PartitionLog(directory, config, jitter_seed=f"{topic}-{partition}")
