"""The log's storage on a local disk: JSON documents written whole, and writes made durable by one barrier."""

from __future__ import annotations

import os

import pytest

from streaming.log import LocalStorage
from streaming.log import storage
from streaming.log.storage import Barrier, read_json, write_json
from tests.log.objects import disk_syncs


def test_a_document_is_replaced_whole_and_a_missing_one_reads_as_none(tmp_path) -> None:
    path = str(tmp_path / "doc.json")
    disk = LocalStorage()
    assert read_json(disk, path) is None
    write_json(disk, path, {"a": 1})
    write_json(disk, path, {"a": 2, "b": [1, 2]})
    assert read_json(disk, path) == {"a": 2, "b": [1, 2]} and os.listdir(tmp_path) == ["doc.json"]


def test_writes_owed_to_a_barrier_are_not_fsynced_one_by_one_and_one_syncfs_makes_them_durable(
        tmp_path, monkeypatch) -> None:
    asked = disk_syncs(monkeypatch)
    fds = len(os.listdir("/proc/self/fd"))
    with Barrier() as barrier:
        logs = [LocalStorage(barrier=barrier) for _ in range(3)]
        for i, s in enumerate(logs):
            s.put(str(tmp_path / f"log-{i}" / "object"), b"data")
            assert s.put_if_absent(str(tmp_path / f"log-{i}" / "manifest"), b"{}")
        assert asked == [], "nothing is asked of the disk before the barrier"
        barrier.cross()
        barrier.cross()  # nothing written since: nothing to ask
    assert asked == ["syncfs"]
    assert len(os.listdir("/proc/self/fd")) == fds, "the barrier's descriptor of the file system is closed with it"
    assert all((tmp_path / f"log-{i}" / "object").read_bytes() == b"data" for i in range(3))


def test_a_storage_without_fsync_owes_its_barrier_nothing(tmp_path, monkeypatch) -> None:
    asked = []
    monkeypatch.setattr(storage, "syncfs", lambda fd: asked.append(fd))
    barrier = Barrier()
    LocalStorage(fsync=False, barrier=barrier).put(str(tmp_path / "object"), b"data")
    barrier.cross()
    assert asked == []


def test_a_barrier_whose_crossing_failed_fails_every_later_crossing(tmp_path, monkeypatch) -> None:
    """A failed syncfs says a write-back was lost, and says it once: no later crossing may pass as if it had not."""
    def lost(fd: int) -> None:
        raise OSError(5, "Input/output error")

    with Barrier() as barrier:
        LocalStorage(barrier=barrier).put(str(tmp_path / "object"), b"data")
        monkeypatch.setattr(storage, "syncfs", lost)
        with pytest.raises(OSError, match="Input/output"):
            barrier.cross()
        monkeypatch.undo()
        with pytest.raises(OSError, match="Input/output"):
            barrier.cross()


def test_a_directory_owed_to_a_barrier_is_synced_though_nothing_is_written_to_it(tmp_path, monkeypatch) -> None:
    """An earlier attempt's writes may sit in the page cache: a task that finds them syncs them before it says done."""
    asked = []
    monkeypatch.setattr(storage, "syncfs", lambda fd: asked.append(fd))
    with Barrier() as barrier:
        barrier.owe_directory(str(tmp_path))
        barrier.owe_directory(str(tmp_path / "missing"))  # nothing there to sync
        barrier.cross()
    assert len(asked) == 1
