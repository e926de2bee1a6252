"""Files a command makes hold a copy of the mirrored data (the state dir, a snapshot's Parquet files, an Iceberg
catalog and its local warehouse), so they are made for the job's user only, whatever the umask."""

from __future__ import annotations

import contextlib
import os
from typing import Iterator

PRIVATE_UMASK = 0o077  # directories 0700, files 0600


@contextlib.contextmanager
def private_files() -> Iterator[None]:
    """While it holds, every file and directory this process makes is private to its user."""
    previous = os.umask(PRIVATE_UMASK)
    try:
        yield
    finally:
        os.umask(previous)
