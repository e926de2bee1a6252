"""Where things live in the state directory: one log directory per source topic-partition."""

from __future__ import annotations

import os
import re

from streaming.log import LogConfig, PartitionLog

LOGS = "logs"
_LOG_DIR = re.compile(r"^(?P<topic>.+)-(?P<partition>\d+)$")


def log_dir(state_dir: str, topic: str, partition: int) -> str:
    return os.path.join(state_dir, LOGS, f"{topic}-{partition}")


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
