"""Why a task failed, as the task saw it: the driver decides on the kind, never on the message's text."""

from __future__ import annotations

import errno
from dataclasses import dataclass
from enum import Enum

from streaming.kafka.failures import is_transient
from streaming.log import LogFencedError


class ErrorKind(Enum):
    SINK_UNREACHABLE = "sink-unreachable"  # the sink's progress could not be read: nothing was cleaned unseen
    DISK_FULL = "disk-full"                # the state dir is full: the job stops and says so
    FENCED = "fenced"                      # another writer of the log committed first: reopened next trigger
    FAILED = "failed"                      # a pass or an emission failed; the next trigger tries again
    OPEN_TRANSACTION = "open-transaction"  # a transaction is open on the sink partition: nothing is emitted to it
    TASK_LOST = "task-lost"                # its task died as a Spark task (its process, its executor): run again
    RECORD_TOO_LARGE = "record-too-large"  # a record too big for its sink: the partition emits up to it, no further


@dataclass(frozen=True)
class TaskError:
    kind: ErrorKind
    message: str
    transient: bool  # a failure that passes (a broker away, a log reopened): --once waits for it

    @classmethod
    def of(cls, exc: BaseException, kind: ErrorKind = ErrorKind.FAILED) -> "TaskError":
        if isinstance(exc, OSError) and exc.errno == errno.ENOSPC:
            kind = ErrorKind.DISK_FULL
        elif isinstance(exc, LogFencedError):
            kind = ErrorKind.FENCED
        fenced = isinstance(exc, LogFencedError) or kind is ErrorKind.FENCED  # the next stage takes over
        return cls(kind, f"{type(exc).__name__}: {exc}", is_transient(exc) or fenced)

    def __str__(self) -> str:
        return self.message
