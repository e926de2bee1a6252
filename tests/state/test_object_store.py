"""Partition logs on a real S3 server (MinIO, on 127.0.0.1): the same log code as on a local
disk, with the store's own put-if-absent fencing a zombie writer, and a crash between objects and
manifest leaving the log as it was."""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import posixpath
import re
import threading
import time
from typing import Callable, Iterator

import pytest

from streaming.cleaner import CompactionConfig, LogCleanerManager
from streaming.partition_id import PartitionId
from streaming.cli.dump import dump_records
from streaming.cli.status import collect_status
from streaming.kafka.admin import unique_topic_name
from streaming.log import LogFencedError, PartitionLog, make_record, partition_log
from streaming.log.columns import iter_records
from streaming.log.read_hold import holding
from streaming.log.store_watch import SAY_AFTER_S, WATCH
from streaming.log.manifest import MANIFESTS, OBJECTS
from streaming.state.layout import LogDir, open_partition_log
from streaming.state import s3
from streaming.state.stores import StateDir, open_state_dir, task_state_dir
from tests.log.objects import PatchedStorage
from tests.cli.test_status import NOW, write_state_dir
from tests.minio import S3Server
from tests.toxiproxy import Proxy, Stream, Toxic, toxic

pytestmark = pytest.mark.integration

CONFIG = CompactionConfig.from_mapping({"min.cleanable.dirty.ratio": "0", "segment.bytes": "2000"})


@pytest.fixture
def state(s3_server):
    return open_state_dir(s3_server.uri(s3_server.new_bucket()))


def _log(state: StateDir, config: CompactionConfig = CONFIG) -> PartitionLog:
    return open_partition_log(state, LogDir.of(state, PartitionId("t", 0)), config.log_config)


def _records(start: int, n: int, keys: int = 7) -> list[dict]:
    return [make_record(o, b"k%d" % (o % keys), b"v%d" % o, 1000 + o) for o in range(start, start + n)]


def _keys(s3_server, state, prefix: str) -> set[str]:
    bucket, _, root = state.root.partition("/")
    found = s3_server.client().list_objects_v2(Bucket=bucket, Prefix=f"{root}/logs/t-0/{prefix}/")
    names = {o["Key"].rsplit("/", 1)[1] for o in found.get("Contents", [])}
    return names - {""}  # the marker pyarrow leaves for a directory whose last object it deleted


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


# ----- what the log relies on, against the real server -------------------------------------------------------


def _fresh(uri: str) -> StateDir:
    """A state dir with clients of its own, as another process (a zombie task, a second job) has."""
    return task_state_dir.__wrapped__(uri)


def _race(*calls: Callable[[], object]) -> list[object]:
    """Each call in a thread of its own, let go at once; what each returned or raised."""
    start, results = threading.Barrier(len(calls)), [None] * len(calls)

    def run(i: int) -> None:
        start.wait()
        try:
            results[i] = calls[i]()
        except Exception as exc:  # noqa: BLE001 (the race's loser raises; the test looks at it)
            results[i] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(calls))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return results


def test_two_writers_racing_one_put_if_absent_exactly_one_wins(s3_server) -> None:
    uri = s3_server.uri(s3_server.new_bucket())
    a, b = _fresh(uri), _fresh(uri)
    for round_ in range(20):
        path = a.path(f"race-{round_}")
        won = _race(functools.partial(a.storage.put_if_absent, path, b"a"),
                    functools.partial(b.storage.put_if_absent, path, b"b"))
        assert sorted(won) == [False, True], won
        assert a.storage.get(path) == (b"a" if won[0] else b"b")


def test_a_list_follows_every_write_and_delete_at_once(state) -> None:
    """Opening a log lists its manifests and takes the newest: a list that lagged a commit would open an
    older version, and the next commit would be fenced by the log's own writer."""
    directory = state.path("listed")
    for i in range(20):
        state.storage.put(posixpath.join(directory, f"m-{i:03d}"), b"x")
        assert [o.name for o in state.storage.list(directory)][-1] == f"m-{i:03d}"
    for i in range(20):
        state.storage.delete(posixpath.join(directory, f"m-{i:03d}"))
        assert f"m-{i:03d}" not in {o.name for o in state.storage.list(directory)}


def test_two_logs_appending_from_one_manifest_version_one_commits_and_the_other_is_fenced(s3_server) -> None:
    uri = s3_server.uri(s3_server.new_bucket())
    first = _log(_fresh(uri))
    first.append(_records(0, 5))
    live, zombie = _log(_fresh(uri)), _log(_fresh(uri))
    outcomes = _race(lambda: live.append(_records(5, 5)), lambda: zombie.append(_records(5, 7)))
    fenced = [o for o in outcomes if isinstance(o, LogFencedError)]
    assert len(fenced) == 1, outcomes
    appended = next(o for o in outcomes if not isinstance(o, Exception)).appended
    assert [r["offset"] for r in _log(_fresh(uri)).read()] == list(range(5 + appended))


def test_a_segment_larger_than_the_multipart_threshold_is_written_in_parts_and_read_back(s3_server) -> None:
    state = _fresh(s3_server.uri(s3_server.new_bucket()))
    config = CompactionConfig.from_mapping({"min.cleanable.dirty.ratio": "0", "segment.bytes": str(1 << 30)})
    plog = _log(state, config)
    values = [os.urandom(1 << 20) for _ in range(24)]  # 24 MiB that no codec shrinks, in one append
    plog.append([make_record(o, b"k%d" % (o % 12), v, 1000 + o) for o, v in enumerate(values)])
    plog.roll()
    plog.append(_records(24, 1))
    assert [r["value"] for r in plog.read(0, 24)] == values
    LogCleanerManager(config).clean_partition(PartitionId("t", 0), plog, now_ms=10**13)
    cleaned = _log(state, config)
    assert [(r["offset"], r["value"]) for r in cleaned.read(0, 24)] == [(o, values[o]) for o in range(12, 24)]
    bucket, _, _ = state.root.partition("/")
    for segment in (plog.segments[0], cleaned.segments[0]):
        key = segment_key(state, segment)
        etag = s3_server.client().head_object(Bucket=bucket, Key=key)["ETag"]
        assert "-" in etag, f"{key} went up in one PUT ({etag}): not a multipart upload"


def segment_key(state: StateDir, segment) -> str:
    """The object key of a segment's (one) object."""
    (chunk,) = segment.chunks
    return posixpath.join(state.root.partition("/")[2], "logs", "t-0", OBJECTS, chunk.name)


def test_a_manifest_replaced_while_a_reader_holds_the_old_one_leaves_the_reader_the_old_log(state) -> None:
    writer = _log(state)
    writer.append(_records(0, 60))
    writer.roll()
    writer.append(_records(60, 5))
    reader = _log(_fresh(state.uri))
    batches = reader.read_batches()
    first = next(batches)
    LogCleanerManager(CONFIG).clean_partition(PartitionId("t", 0), writer, now_ms=10**13)
    writer.collect_garbage()  # within file.delete.delay.ms: what the reader's manifest names stays
    offsets = [r["offset"] for r in iter_records(iter([first, *batches]))]
    assert offsets == list(range(65)), "the reader reads the log of the manifest it loaded"
    assert len([r for r in _log(_fresh(state.uri)).read()]) == 7 + 5, "a new reader reads the cleaned log"


def test_garbage_collection_keeps_what_a_held_reader_reads_and_removes_it_once_released(s3_server, state) -> None:
    writer = _log(state)
    writer.append(_records(0, 60))
    writer.roll()
    writer.append(_records(60, 5))
    directory = writer.dir
    with holding(state.storage, directory):
        reader = _log(_fresh(state.uri))
        batches = reader.read_batches()
        first = next(batches)
        LogCleanerManager(CONFIG).clean_partition(PartitionId("t", 0), writer, now_ms=10**13)
        writer.collect_at_end()  # the end of a run: held, so only what is past file.delete.delay.ms goes
        assert [r["offset"] for r in iter_records(iter([first, *batches]))] == list(range(65))
    writer.collect_at_end()
    named = {c.name for s in _log(state).segments for c in s.chunks}
    assert _keys(s3_server, state, OBJECTS) == named, "released, only the newest manifest's objects stay"


def test_the_end_of_a_run_leaves_an_object_no_manifest_names_yet_to_its_writer(s3_server, state,
                                                                              monkeypatch) -> None:
    """A task whose executor was lost writes its object, and commits the manifest naming it only after the run's
    end collected the garbage: the object is still there, and the log it committed reads whole."""
    writer = _log(state)
    writer.append(_records(0, 60))
    writer.roll()
    run = _log(_fresh(state.uri))
    LogCleanerManager(CONFIG).clean_partition(PartitionId("t", 0), run, now_ms=10**13)  # objects it replaces
    lost = _log(_fresh(state.uri))
    real_commit = partition_log.commit

    def late_commit(*args, **kwargs):
        run.collect_at_end()  # between the lost task's object and its manifest
        return real_commit(*args, **kwargs)
    monkeypatch.setattr(partition_log, "commit", late_commit)
    lost.append(_records(60, 5))
    monkeypatch.undo()
    assert [r["offset"] for r in _log(_fresh(state.uri)).read()][-5:] == list(range(60, 65))
    named = {c.name for s in _log(_fresh(state.uri)).segments for c in s.chunks}
    assert named <= _keys(s3_server, state, OBJECTS)


# ----- a store that stops answering, then answers ------------------------------------------------------------


@pytest.fixture(scope="module")
def own_store(tmp_path_factory) -> Iterator[S3Server]:
    """A server these tests kill and start again: the session's goes on for the others."""
    server = S3Server(tmp_path_factory.mktemp("own-minio") / "data")
    try:
        yield server
    finally:
        server.stop()


@contextlib.contextmanager
def _retries() -> Iterator[threading.Event]:
    """An event set when a call the store did not answer is tried again (store_watch's DEBUG line)."""
    tried_again = threading.Event()

    class Seen(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if "trying again" in record.getMessage():
                tried_again.set()

    logger = logging.getLogger("streaming.log.store_watch")
    handler, level = Seen(logging.DEBUG), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    try:
        yield tried_again
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


def _proxied(s3_server: S3Server, toxiproxy) -> tuple[StateDir, Proxy, str]:
    """A state dir reached through a proxy of its own, and its bucket."""
    proxy = toxiproxy.proxy(unique_topic_name("s3"), s3_server.endpoint)
    bucket = s3_server.new_bucket()
    return _fresh(s3_server.uri(bucket, endpoint=proxy.listen)), proxy, bucket


@pytest.mark.minio
def test_an_append_while_the_store_restarts_waits_says_since_when_and_lands(own_store, caplog) -> None:
    state = _fresh(own_store.uri(own_store.new_bucket()))
    plog = _log(state)
    plog.append(_records(0, 10))
    own_store.kill()
    appending = threading.Thread(target=plog.append, args=(_records(10, 10),))
    with caplog.at_level(logging.WARNING, logger="streaming.log.store_watch"), _retries() as tried_again:
        appending.start()
        assert tried_again.wait(30), "the append met the store down"
        WATCH.check(time.monotonic() + SAY_AFTER_S + 1)
        own_store.start()
        appending.join(30)
        WATCH.check(time.monotonic())
    assert not appending.is_alive(), "the append waited past the store's return"
    said = [r.getMessage() for r in caplog.records]
    assert any(re.search(r"^waiting for the state store since \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC .*: a (write|read|listing|look)", s)
               for s in said), said
    assert said[-1].startswith("the state store answers again"), said
    assert [r["offset"] for r in _log(_fresh(state.uri)).read()] == list(range(20))


def test_a_read_cut_off_mid_transfer_is_tried_again_at_the_same_byte(s3_server, toxiproxy) -> None:
    state, proxy, bucket = _proxied(s3_server, toxiproxy)
    data = os.urandom(8 << 20)
    s3_server.client().put_object(Bucket=bucket, Key="state/object", Body=data)
    rest: list[bytes] = []
    with state.storage.open_read(state.path("object")) as f, _retries() as tried_again:
        head = f.read(1 << 20)
        cut = proxy.add(Toxic.limit_data(256 << 10), (Stream.DOWNSTREAM,))
        reading = threading.Thread(target=lambda: rest.append(f.read()))
        reading.start()
        assert tried_again.wait(60), "the read was cut off"
        proxy.remove(cut)
        reading.join(60)
    assert head + rest[0] == data


def test_a_write_cut_off_mid_upload_is_sent_again_whole(s3_server, toxiproxy) -> None:
    state, proxy, bucket = _proxied(s3_server, toxiproxy)
    data = os.urandom(24 << 20)  # parts of a multipart upload
    cut = proxy.add(Toxic.limit_data(4 << 20), (Stream.UPSTREAM,))
    with _retries() as tried_again:
        writing = threading.Thread(target=state.storage.put, args=(state.path("object"), data))
        writing.start()
        assert tried_again.wait(60), "the upload was cut off"
        proxy.remove(cut)
        writing.join(120)
    assert not writing.is_alive()
    assert s3_server.client().get_object(Bucket=bucket, Key="state/object")["Body"].read() == data


def test_a_conditional_create_whose_answer_was_lost_is_known_as_its_own(s3_server, toxiproxy, monkeypatch) -> None:
    """The request reaches the server and its answer never comes back: the next attempt finds the object
    there, and it holds this writer's bytes, so the create was this writer's."""
    monkeypatch.setattr(s3, "REQUEST_TIMEOUT_S", 2.0)
    state, proxy, bucket = _proxied(s3_server, toxiproxy)
    path = state.path("manifest-1")
    created: list[bool] = []
    with toxic([proxy], Toxic.blackhole(), (Stream.DOWNSTREAM,)), _retries() as tried_again:
        writing = threading.Thread(target=lambda: created.append(state.storage.put_if_absent(path, b"mine")))
        writing.start()
        assert tried_again.wait(30), "the first attempt had no answer"
    writing.join(30)
    assert s3_server.client().get_object(Bucket=bucket, Key="state/manifest-1")["Body"].read() == b"mine"
    assert created == [True]
    assert state.storage.put_if_absent(path, b"theirs") is False, "a second create is refused"
