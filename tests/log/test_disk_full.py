"""A full disk under the log: the write fails with ENOSPC, and what the log holds afterwards is exactly
what it held before the failed write (no half-written object or manifest taken as truth).

The disk is a LocalStorage with a capacity: like a real filesystem it writes what fits, then fails.
The end-to-end test on a real tmpfs is in tests/e2e/test_faults.py.
"""

from __future__ import annotations

import contextlib
import errno
import os
from typing import BinaryIO, Iterator

import pytest

from streaming.cleaner import Cleaner, CompactionConfig, LogCleanerManager, PartitionCleanerState
from streaming.partition_id import PartitionId
from streaming.log import LocalStorage, LogConfig, PartitionLog, make_record
from streaming.log.manifest import OBJECTS


class FullDisk(LocalStorage):
    def __init__(self, root: str, capacity: int) -> None:
        super().__init__(fsync=False)
        self.root = root
        self.capacity = capacity

    def used(self) -> int:
        return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(self.root) for f in fs)

    @contextlib.contextmanager
    def _staged(self, path: str) -> Iterator[tuple[BinaryIO, str]]:
        with super()._staged(path) as (f, tmp):
            yield _Budgeted(f, self), tmp


class _Budgeted:
    def __init__(self, f: BinaryIO, disk: FullDisk) -> None:
        self.f, self.disk = f, disk

    def write(self, data: bytes) -> None:
        self.f.flush()
        room = max(0, self.disk.capacity - self.disk.used())
        self.f.write(data[:room])
        if room < len(data):
            self.f.flush()
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    def __getattr__(self, name: str):
        return getattr(self.f, name)


def records(start: int, n: int, key_mod: int = 1000) -> list[dict]:
    return [make_record(o, b"k%d" % (o % key_mod), b"v" * 50, 0) for o in range(start, start + n)]


def offsets(directory: str) -> list[int]:
    return [r["offset"] for r in PartitionLog(directory, LogConfig(fsync=False)).read()]


def test_append_on_a_full_disk_fails_and_keeps_exactly_what_was_stored(tmp_path) -> None:
    disk = FullDisk(str(tmp_path), capacity=40_000)
    log = PartitionLog(str(tmp_path), LogConfig(fsync=False), storage=disk)
    log.append(records(0, 10))
    with pytest.raises(OSError) as err:
        for start in range(10, 10_000, 10):
            log.append(records(start, 10))
    assert err.value.errno == errno.ENOSPC
    stored = offsets(str(tmp_path))
    assert stored == list(range(len(stored))) and len(stored) >= 10, "whole appends, nothing torn"
    assert stored == [r["offset"] for r in log.read()], "memory claims no record the disk lacks"
    disk.capacity = 10**9
    log.append(records(len(stored), 10))
    assert offsets(str(tmp_path)) == list(range(len(stored) + 10))


def test_clean_on_a_full_disk_leaves_the_old_segments_and_no_new_object(tmp_path) -> None:
    config = CompactionConfig.from_mapping({"min.cleanable.dirty.ratio": "0", "segment.bytes": "2000"})
    disk = FullDisk(str(tmp_path), capacity=10**9)
    log = PartitionLog(str(tmp_path), config.log_config, storage=disk)
    log.append(records(0, 200, key_mod=150))
    log.roll()
    before = [(r["offset"], r["key"], r["value"]) for r in log.read()]
    objects = sorted(os.listdir(tmp_path / OBJECTS))
    disk.capacity = disk.used() + 500  # room for part of a cleaned segment, not all of it
    with pytest.raises(OSError, match="No space left on device"):  # the job stops; the log is not to blame
        LogCleanerManager(config, Cleaner(config)).clean_partition(PartitionId("t", 0), log, now_ms=0)
    assert sorted(os.listdir(tmp_path / OBJECTS)) == objects, "the partial object was removed"
    reopened = PartitionLog(str(tmp_path), config.log_config)
    assert not PartitionCleanerState.load(reopened).uncleanable
    assert [(r["offset"], r["key"], r["value"]) for r in reopened.read()] == before
    assert not reopened.damaged
