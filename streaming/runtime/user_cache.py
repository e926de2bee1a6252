"""The per-user cache that derived files live in (a Spark home without zips, Apache Kafka's jars).

Each entry is filled in a scratch directory beside it and moved into place with one rename, so a process
that dies halfway leaves nothing that looks complete, and processes filling the same entry at once all end
with one finished directory.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Callable


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "kcompact"


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
