"""A reader's hold on a partition log, so that the end of a run can delete what it replaced at once.

Objects a commit replaced wait file.delete.delay.ms (Kafka's name) because a reader of an older manifest
may still read them. A run that ends has no reader of its own left, so the run's last collection keeps only
the newest manifest and its objects, unless a reader outside the job (kcompact dump) holds the log:
such a reader puts a hold before it loads a manifest and deletes it when done. Without it, a --once run over
a backlog would leave every object its passes replaced until the next run: a state dir growing with records.

A hold older than file.delete.delay.ms is a killed reader's: it holds nothing and is deleted. A reader
that may not write to the state dir reads without a hold, under the grace period alone.
"""

from __future__ import annotations

import contextlib
import logging
import posixpath
import uuid
from collections.abc import Iterator

from streaming.log.storage import Storage

log = logging.getLogger(__name__)

HOLDS = "holds"


def holds_dir(directory: str) -> str:
    return posixpath.join(directory, HOLDS)


@contextlib.contextmanager
def holding(storage: Storage, directory: str) -> Iterator[None]:
    """Hold the log while the body reads it; put before the body loads a manifest."""
    path = posixpath.join(holds_dir(directory), uuid.uuid4().hex)
    try:
        storage.put(path, b"")
    except OSError as exc:
        log.debug("%s: reading without a hold (%s)", directory, exc)
        yield
        return
    try:
        yield
    finally:
        with contextlib.suppress(OSError):  # one left behind expires after the grace period
            storage.delete(path)


def held(storage: Storage, directory: str, now_ms: int, grace_ms: int) -> bool:
    """Whether a live reader holds the log; the holds of killed readers (past ``grace_ms``) are deleted."""
    live = False
    for info in storage.list(holds_dir(directory)):
        if info.mtime_ms > now_ms - grace_ms:
            live = True
        else:
            storage.delete(posixpath.join(holds_dir(directory), info.name))
    return live
