"""The first dirty offset of a partition, in Kafka's cleaner-offset-checkpoint format.

One file per partition log (not one per disk as in Kafka) because each partition is cleaned by its own
Spark task, possibly on another executor: a shared file would need cross-task locking.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from streaming.log.storage import Storage
from streaming.errors import UserError

CHECKPOINT_FILE = "cleaner-offset-checkpoint"
VERSION = 0


@dataclass(frozen=True)
class PartitionId:
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


class CheckpointError(UserError, RuntimeError):
    pass


def read_checkpoint(storage: Storage, log_dir: str) -> int | None:
    path = os.path.join(log_dir, CHECKPOINT_FILE)
    if not storage.exists(path):
        return None
    lines = storage.read(path).decode().splitlines()
    try:
        if int(lines[0]) != VERSION:
            raise CheckpointError(f"{path}: unsupported checkpoint version {lines[0]}")
        count = int(lines[1])
        entries = [line.split() for line in lines[2: 2 + count]]
        if count != 1 or len(entries) != 1 or len(entries[0]) != 3:
            raise CheckpointError(f"{path}: expected one 'topic partition offset' line")
        return int(entries[0][2])
    except (IndexError, ValueError) as exc:
        raise CheckpointError(f"{path}: malformed checkpoint ({exc})") from exc


def write_checkpoint(storage: Storage, log_dir: str, pid: PartitionId, offset: int) -> None:
    path = os.path.join(log_dir, CHECKPOINT_FILE)
    tmp = path + ".tmp"
    storage.write(tmp, f"{VERSION}\n1\n{pid.topic} {pid.partition} {offset}\n".encode())
    storage.rename(tmp, path)
