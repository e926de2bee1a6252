"""A full disk under the log: the write fails with ENOSPC, and what the log holds afterwards is exactly
what it held before the failed write (no half-written record, segment or sidecar taken as truth).

The disk is a LocalStorage with a byte budget: like a real filesystem it writes what fits, then fails.
The end-to-end test on a real tmpfs is in tests/e2e/test_faults.py.
"""

from __future__ import annotations

import contextlib
import errno
import os
from typing import BinaryIO, Iterator

import pytest

from streaming.cleaner import Cleaner, CompactionConfig, LogCleanerManager, PartitionId
from streaming.log import LocalStorage, LogConfig, PartitionLog, make_record


class FullDisk(LocalStorage):
    def __init__(self, budget: int) -> None:
        super().__init__(fsync=False)
        self.budget = budget

    def _take(self, f: BinaryIO, data: bytes) -> None:
        fits = data[: max(0, self.budget)]
        f.write(fits)
        self.budget -= len(fits)
        if len(fits) < len(data):
            f.flush()
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    @contextlib.contextmanager
    def open_write(self, path: str) -> Iterator[BinaryIO]:
        with open(path, "wb") as f:
            yield _Budgeted(f, self)

    def append(self, path: str, data: bytes) -> None:
        with open(path, "ab") as f:
            self._take(f, data)

    def delete(self, path: str) -> None:
        freed = os.path.getsize(path) if os.path.exists(path) else 0
        super().delete(path)
        self.budget += freed


class _Budgeted:
    def __init__(self, f: BinaryIO, disk: FullDisk) -> None:
        self.f, self.disk = f, disk

    def write(self, data: bytes) -> None:
        self.disk._take(self.f, data)


def records(start: int, n: int, key_mod: int = 1000) -> list[dict]:
    return [make_record(o, b"k%d" % (o % key_mod), b"v" * 50, 0) for o in range(start, start + n)]


def offsets(directory: str) -> list[int]:
    return [r["offset"] for r in PartitionLog(directory, LogConfig(fsync=False)).read()]


def test_append_on_a_full_disk_fails_and_keeps_exactly_what_was_stored(tmp_path) -> None:
    disk = FullDisk(budget=4000)
    log = PartitionLog(str(tmp_path), LogConfig(fsync=False), storage=disk)
    log.append(records(0, 10))
    with pytest.raises(OSError) as err:
        for start in range(10, 1000, 10):
            log.append(records(start, 10))
    assert err.value.errno == errno.ENOSPC
    stored = offsets(str(tmp_path))
    assert stored == list(range(len(stored))) and len(stored) >= 10, "a whole-batch prefix, nothing torn"
    assert stored == [r["offset"] for r in log.read()], "memory claims no record the disk lacks"
    disk.budget = 10**9
    log.append(records(len(stored), 10))
    assert offsets(str(tmp_path)) == list(range(len(stored) + 10))


def test_clean_on_a_full_disk_leaves_the_old_segments_and_no_cleaned_file(tmp_path) -> None:
    config = CompactionConfig.from_mapping({"min.cleanable.dirty.ratio": "0", "segment.bytes": "2000"})
    disk = FullDisk(budget=10**9)
    log = PartitionLog(str(tmp_path), config.log_config, storage=disk)
    log.append(records(0, 200, key_mod=150))
    log.roll()
    before = [(r["offset"], r["key"], r["value"]) for r in log.read()]
    disk.budget = 500  # room for part of a cleaned segment, not all of it
    outcome = LogCleanerManager(config, Cleaner(config)).clean_partition(PartitionId("t", 0), log, now_ms=0)
    assert outcome.state.uncleanable and "No space left on device" in outcome.error
    assert not [n for n in os.listdir(tmp_path) if n.endswith(".cleaned") or n.endswith(".swap")]
    reopened = PartitionLog(str(tmp_path), config.log_config)
    assert [(r["offset"], r["key"], r["value"]) for r in reopened.read()] == before
    assert not reopened.damaged
