"""Partition logs on a real S3-compatible server (moto, on 127.0.0.1): the same log code as on a local
disk, with the store's own put-if-absent fencing a zombie writer, and a crash between objects and
manifest leaving the log as it was."""

from __future__ import annotations

import pytest

from streaming.cleaner import CompactionConfig, LogCleanerManager
from streaming.partition_id import PartitionId
from streaming.cli.dump import dump_records
from streaming.cli.status import collect_status
from streaming.log import LogFencedError, PartitionLog, make_record
from streaming.log.manifest import MANIFESTS, OBJECTS
from streaming.state.layout import LogDir, open_partition_log
from streaming.state.stores import open_state_dir
from tests.log.objects import PatchedStorage
from tests.cli.test_status import NOW, write_state_dir

CONFIG = CompactionConfig.from_mapping({"min.cleanable.dirty.ratio": "0", "segment.bytes": "2000"})


@pytest.fixture
def state(s3_server):
    return open_state_dir(s3_server.uri(s3_server.new_bucket()))


def _log(state) -> PartitionLog:
    return open_partition_log(state, LogDir.of(state, PartitionId("t", 0)), CONFIG.log_config)


def _records(start: int, n: int, keys: int = 7) -> list[dict]:
    return [make_record(o, b"k%d" % (o % keys), b"v%d" % o, 1000 + o) for o in range(start, start + n)]


def _keys(s3_server, state, prefix: str) -> set[str]:
    bucket, _, root = state.root.partition("/")
    found = s3_server.client().list_objects_v2(Bucket=bucket, Prefix=f"{root}/logs/t-0/{prefix}/")
    return {o["Key"].rsplit("/", 1)[1] for o in found.get("Contents", [])}


def test_put_if_absent_creates_once(state) -> None:
    path = state.path("once")
    assert state.storage.put_if_absent(path, b"first") is True
    assert state.storage.put_if_absent(path, b"second") is False
    assert state.storage.get(path) == b"first"


def test_a_log_on_s3_appends_rolls_cleans_and_reopens_as_on_disk(s3_server, state) -> None:
    plog = _log(state)
    plog.append(_records(0, 60))
    plog.roll()
    plog.append(_records(60, 5))
    outcome = LogCleanerManager(CONFIG).clean_partition(PartitionId("t", 0), plog, now_ms=10**13)
    assert outcome.result is not None and outcome.error is None
    survivors = {r["key"]: r["offset"] for r in _records(0, 60)}
    expected = sorted(survivors.values()) + list(range(60, 65))
    assert [r["offset"] for r in _log(state).read()] == expected
    assert _log(state).cleaner_checkpoint == 60
    assert {c.name for s in plog.segments for c in s.chunks} <= _keys(s3_server, state, OBJECTS)


def test_a_crash_between_objects_and_manifest_leaves_the_log_as_it_was(s3_server, state) -> None:
    plog = _log(state)
    plog.append(_records(0, 10))
    manifests = _keys(s3_server, state, MANIFESTS)

    def crash(*_a):
        raise KeyboardInterrupt  # the task's process dies here

    plog.storage = PatchedStorage(state.storage, put_if_absent=crash)
    with pytest.raises(KeyboardInterrupt):
        plog.append(_records(10, 10))
    assert _keys(s3_server, state, MANIFESTS) == manifests, "no manifest was written"
    reopened = _log(state)
    assert [r["offset"] for r in reopened.read()] == list(range(10)) and reopened.log_end_offset == 10
    orphans = _keys(s3_server, state, OBJECTS) - {c.name for s in reopened.segments for c in s.chunks}
    assert len(orphans) == 1
    reopened.collect_garbage(grace_ms=0)
    assert not _keys(s3_server, state, OBJECTS) & orphans
    assert reopened.append(_records(10, 10)).appended == 10, "the replay of the lost append"
    assert [r["offset"] for r in _log(state).read()] == list(range(20))


def test_a_zombie_writer_is_refused(state) -> None:
    live = _log(state)
    live.append(_records(0, 10))
    live.roll()
    zombie = _log(state)  # a task of the dead driver, still running
    successor = _log(state)
    successor.append(_records(10, 3))
    with pytest.raises(LogFencedError, match="fenced"):
        zombie.append(_records(10, 5))
    manager = LogCleanerManager(CONFIG)
    with pytest.raises(LogFencedError):
        manager.cleaner.clean(zombie, manager.select(zombie, PartitionId("t", 0), 10**13), 10**13)
    reopened = _log(state)
    assert [r["offset"] for r in reopened.read()] == list(range(13)) and reopened.cleaner_checkpoint is None


def test_status_and_dump_read_a_state_dir_on_s3(s3_server) -> None:
    uri = write_state_dir(s3_server.uri(s3_server.new_bucket(), "jobs/orders"))
    status = collect_status(uri, NOW)
    assert [(p.partition, p.records, p.emitted_up_to) for p in status.partitions] == [(0, 2, 5), (1, 6, None)]
    assert [(r["offset"], r["value"]) for r in dump_records(uri, partition=0)] == [(4, "v4"), (5, "v5")]
