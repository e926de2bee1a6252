"""The per-user cache that derived files live in (a Spark home without zips, Apache Kafka's jars).

Each entry is filled in a scratch directory beside it and moved into place with one rename, so a process
that dies halfway leaves nothing that looks complete, and two that fill the same entry at once both end with
it whole (``publish``). An entry that takes minutes to fetch or build is filled under a lock (``filling``):
a process that finds another filling it waits rather than doing it a second time.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "kcompact"


@contextmanager
def filling(target: Path) -> Iterator[None]:
    """Held while ``target`` is checked and filled. The test set-up fills entries in the background while the
    tests start, and a test that needs an entry first waits here for that fill to end; the lock goes with
    the process, so one that dies leaves none behind. The lock files live apart, in the cache's own ``.locks``,
    so a directory that holds entries holds nothing else."""
    locks = cache_root() / ".locks"
    locks.mkdir(parents=True, exist_ok=True)
    name = hashlib.sha256(str(target.resolve()).encode()).hexdigest()[:24]
    with open(locks / f"{target.name}-{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def scratch_beside(target: Path) -> Path:
    target.parent.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))


def publish(scratch: Path, target: Path, complete: Callable[[Path], bool]) -> None:
    """Move a filled scratch directory to ``target``; a damaged target is replaced, a complete one that
    another process published first is kept (and the scratch removed)."""
    if os.path.lexists(target) and not complete(target):
        shutil.rmtree(target, ignore_errors=True)
    try:
        os.rename(scratch, target)
    except OSError:
        shutil.rmtree(scratch, ignore_errors=True)
        if not complete(target):
            raise
