"""Files a command makes hold a copy of the mirrored data (the state dir, a snapshot's Parquet files, an Iceberg
catalog and its local warehouse), so they are made for the job's user only, whatever the umask, and a dir of the
job's that others can already read is said at start."""

from __future__ import annotations

import contextlib
import logging
import os
import stat
from typing import Iterator

log = logging.getLogger("kcompact")

PRIVATE_UMASK = 0o077  # directories 0700, files 0600


@contextlib.contextmanager
def private_files() -> Iterator[None]:
    """While it holds, every file and directory this process makes is private to its user."""
    previous = os.umask(PRIVATE_UMASK)
    try:
        yield
    finally:
        os.umask(previous)


def warn_if_readable_by_others(path: str | None, option: str) -> None:
    """A local dir of the job's that exists and lets others in: it holds a copy of the mirrored data."""
    if path is None or "://" in path or not os.path.isdir(path):
        return
    mode = stat.S_IMODE(os.stat(path).st_mode)
    if mode & 0o077:
        log.warning("%s %s can be read by other users (mode %o): it holds a copy of the mirrored data; "
                    "chmod -R go-rwx %s", option, path, mode, path)
