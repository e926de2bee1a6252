"""The end of a run keeps only the newest manifest and its objects, unless a reader holds the log."""

from __future__ import annotations

import os
import time

from streaming.log import LogConfig, PartitionLog, make_record
from streaming.log.manifest import MANIFESTS, OBJECTS, Manifest
from streaming.log.read_hold import HOLDS, holding
from streaming.log.storage import LocalStorage
from tests.log.objects import PatchedStorage

DELAY_MS = 60_000


def _log_with_garbage(tmp_path) -> PartitionLog:
    """Appends, rolls and a pass that replaces the sealed segments: objects no newest manifest names."""
    config = LogConfig(fsync=False, segment_bytes=1000, file_delete_delay_ms=DELAY_MS)
    log = PartitionLog(str(tmp_path), config, jitter_seed="t-0")
    for o in range(60):
        log.append([make_record(o, b"k%d" % (o % 4), b"v" * 30, 0)])
    sealed = log.segments[:-1]
    log.replace(sealed, [])
    return log


def _names(directory) -> set[str]:
    return {p.name for p in directory.iterdir()}


def _newest_needs(tmp_path) -> set[str]:
    newest = max((tmp_path / MANIFESTS).iterdir())
    return {c.name for s in Manifest.from_json(newest.read_bytes()).segments for c in s.chunks}


def test_the_end_of_a_run_keeps_only_the_newest_manifest_and_its_objects(tmp_path) -> None:
    log = _log_with_garbage(tmp_path)
    before = _names(tmp_path / OBJECTS)
    records = [r["offset"] for r in log.read()]
    assert len(before) > len(_newest_needs(tmp_path))
    assert log.collect_at_end() > 0
    assert len(list((tmp_path / MANIFESTS).iterdir())) == 1
    assert _names(tmp_path / OBJECTS) == _newest_needs(tmp_path)
    reopened = PartitionLog(str(tmp_path), log.config, jitter_seed="t-0")
    assert [r["offset"] for r in reopened.read()] == records


def test_a_readers_hold_keeps_what_older_manifests_name_until_it_ends(tmp_path) -> None:
    log = _log_with_garbage(tmp_path)
    before = _names(tmp_path / OBJECTS)
    with holding(log.storage, log.dir):
        log.collect_at_end()
        assert _names(tmp_path / OBJECTS) == before, "young replaced objects stay for the reader"
    assert not list((tmp_path / HOLDS).iterdir()), "the reader's hold goes with it"
    log.collect_at_end()
    assert _names(tmp_path / OBJECTS) == _newest_needs(tmp_path)


def test_a_killed_readers_hold_counts_for_file_delete_delay_ms_then_goes(tmp_path) -> None:
    log = _log_with_garbage(tmp_path)
    (tmp_path / HOLDS).mkdir()
    hold = tmp_path / HOLDS / "left-by-a-killed-reader"
    hold.write_bytes(b"")
    long_ago = time.time() - 2 * DELAY_MS / 1000
    os.utime(hold, (long_ago, long_ago))
    log.collect_at_end()
    assert not hold.exists() and _names(tmp_path / OBJECTS) == _newest_needs(tmp_path)


def test_a_reader_that_may_not_write_reads_without_a_hold() -> None:
    def refused(path: str, data: bytes) -> None:
        raise PermissionError(13, "Permission denied", path)

    storage = PatchedStorage(LocalStorage(fsync=False), put=refused)
    read = []
    with holding(storage, "/nonexistent/log"):
        read.append(1)
    assert read == [1]
