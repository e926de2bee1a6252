"""The Kafka source and the foreachBatch appender against the real broker fixture."""

from __future__ import annotations

import json
import os

import pyarrow as pa
import pytest
from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions

from streaming.job import append
from streaming.erasure.events import AuditKeys
from streaming.job.append import AppendTask, LogAppender, append_partitions
from streaming.job.append_counts import AppendCounts
from streaming.job.engine import QueryPlan, SourceRead
from streaming.configuration.subscription import EARLIEST, LATEST, StartingOffsets, Subscribe
from streaming.partition_id import PartitionId
from streaming.spark.driver import SparkEngine, SparkQuery
from streaming.log import LogConfig, PartitionLog, storage
from streaming.spark.source.columns import ARROW_SCHEMA
from streaming.state.layout import REJECTED, LogDir, log_dir, open_partition_log
from streaming.state.stores import open_state_dir
from tests.kafka_helpers import Sent, log_contents, produce
from tests.log.objects import disk_syncs

pytestmark = pytest.mark.integration


def run_available_now(spark, bootstrap: str, topic: str, state_dir: str, appender: LogAppender | None = None,
                      **read: object) -> tuple[LogAppender, SparkQuery]:
    """The job's query (SparkEngine) with ``read``: SourceRead's fields other than the cluster and topic."""
    appender = appender or LogAppender(state_dir, {topic: LogConfig(fsync=False)})
    plan = QueryPlan(SourceRead(bootstrap, Subscribe((topic,)), **read), os.path.join(state_dir, "checkpoint"),
                     once=True)
    query = SparkEngine(spark).start_query(plan, appender)
    query.await_termination(300)
    assert query.exception() is None, query.exception()
    return appender, query


def by_partition(sent: list[Sent], partition: int) -> list[tuple]:
    return [s.as_log() for s in sent if s.partition == partition]


def mixed_records(n: int, partitions: int, base_ts: int = 1_600_000_000_000) -> list[Sent]:
    out = []
    for i in range(n):
        headers = [("trace", b"%d" % i)] + ([("trace", None), ("v", b"\x00" * 8)] if i % 3 == 0 else [])
        out.append(Sent(i % partitions, b"key-%d" % (i % 11), None if i % 9 == 4 else b"value-%d" % i,
                        base_ts + 37 * i - (i % 5) * 1000, headers))
    return out


def test_several_partitions_arrive_exactly(spark, bootstrap_servers, new_topic, tmp_path) -> None:
    topic = new_topic(partitions=3)
    sent = produce(bootstrap_servers, topic, mixed_records(90, 3))
    appender, _ = run_available_now(spark, bootstrap_servers, topic, str(tmp_path))
    for p in range(3):
        assert log_contents(str(tmp_path), topic, p) == by_partition(sent, p)
    assert appender.last_batch.partitions == 3


def test_restart_from_checkpoint_and_replayed_batch_give_nothing_missing_nothing_twice(
        spark, bootstrap_servers, new_topic, tmp_path) -> None:
    topic = new_topic(partitions=2)
    first = produce(bootstrap_servers, topic, mixed_records(40, 2))
    run_available_now(spark, bootstrap_servers, topic, str(tmp_path))
    second = produce(bootstrap_servers, topic, mixed_records(30, 2, base_ts=1_700_000_000_000))
    run_available_now(spark, bootstrap_servers, topic, str(tmp_path))
    expected = {p: by_partition(first + second, p) for p in range(2)}
    assert {p: log_contents(str(tmp_path), topic, p) for p in range(2)} == expected

    commits = os.path.join(str(tmp_path), "checkpoint", "commits")
    last = max(os.listdir(commits), key=lambda n: int(n) if n.isdigit() else -1)
    for name in (last, f".{last}.crc"):  # as if the job died after appending, before Spark committed
        os.remove(os.path.join(commits, name))
    appender, _ = run_available_now(spark, bootstrap_servers, topic, str(tmp_path))
    assert appender.last_batch.appended == 0 and appender.last_batch.skipped == 30
    assert {p: log_contents(str(tmp_path), topic, p) for p in range(2)} == expected


def test_aborted_transactions_never_arrive(spark, bootstrap_servers, new_topic, tmp_path) -> None:
    topic = new_topic(partitions=1)
    tx = Producer({"bootstrap.servers": bootstrap_servers, "transactional.id": f"tx-{topic}"})
    tx.init_transactions()
    for outcome in ("commit", "abort", "commit"):
        tx.begin_transaction()
        for i in range(3):
            tx.produce(topic, key=b"k%d" % i, value=outcome.encode(), partition=0, timestamp=1000 + i)
        tx.flush()
        tx.commit_transaction() if outcome == "commit" else tx.abort_transaction()
    run_available_now(spark, bootstrap_servers, topic, str(tmp_path))
    values = [v for _, _, v, _, _ in log_contents(str(tmp_path), topic, 0)]
    assert values == [b"commit"] * 6


def test_starting_offsets_latest_then_new_records(spark, bootstrap_servers, new_topic, tmp_path) -> None:
    topic = new_topic(partitions=1)
    produce(bootstrap_servers, topic, mixed_records(5, 1))
    run_available_now(spark, bootstrap_servers, topic, str(tmp_path), starting_offsets=StartingOffsets(LATEST))
    assert log_contents(str(tmp_path), topic, 0) == []
    later = produce(bootstrap_servers, topic, mixed_records(3, 1))
    run_available_now(spark, bootstrap_servers, topic, str(tmp_path), starting_offsets=StartingOffsets(LATEST))
    assert log_contents(str(tmp_path), topic, 0) == [s.as_log() for s in later]


def test_starting_offsets_json(spark, bootstrap_servers, new_topic, tmp_path) -> None:
    topic = new_topic(partitions=2)
    sent = produce(bootstrap_servers, topic, mixed_records(20, 2))
    run_available_now(spark, bootstrap_servers, topic, str(tmp_path),
                      starting_offsets=StartingOffsets(None, {PartitionId(topic, 0): 3, PartitionId(topic, 1): EARLIEST}))
    assert log_contents(str(tmp_path), topic, 0) == by_partition(sent, 0)[3:]
    assert log_contents(str(tmp_path), topic, 1) == by_partition(sent, 1)


def test_max_offsets_per_trigger_bounds_every_batch(spark, bootstrap_servers, new_topic, tmp_path) -> None:
    topic = new_topic(partitions=2)
    produce(bootstrap_servers, topic, mixed_records(35, 2))
    appended: list[int] = []

    class Counting(LogAppender):
        def __call__(self, batch, batch_id: int) -> None:
            super().__call__(batch, batch_id)
            appended.append(self.last_batch.appended)

    run_available_now(spark, bootstrap_servers, topic, str(tmp_path),
                      Counting(str(tmp_path), {topic: LogConfig(fsync=False)}), max_offsets_per_trigger=10)
    assert max(appended) <= 10 and sum(appended) == 35 and len(appended) == 4


def test_new_partitions_are_picked_up(spark, bootstrap_servers, new_topic, tmp_path) -> None:
    topic = new_topic(partitions=1)
    produce(bootstrap_servers, topic, mixed_records(4, 1))
    run_available_now(spark, bootstrap_servers, topic, str(tmp_path))
    admin = AdminClient({"bootstrap.servers": bootstrap_servers})
    for f in admin.create_partitions([NewPartitions(topic, 2)]).values():
        f.result(30)
    added = produce(bootstrap_servers, topic, [Sent(1, b"k", b"v", 5000), Sent(1, b"k", b"w", 5001)])
    run_available_now(spark, bootstrap_servers, topic, str(tmp_path))
    assert log_contents(str(tmp_path), topic, 1) == [s.as_log() for s in added]


@pytest.mark.parametrize("fail", [True, False])
def test_deleted_source_offsets_are_reported_per_fail_on_data_loss(spark, bootstrap_servers, new_topic, tmp_path,
                                                                   fail: bool) -> None:
    topic = new_topic(partitions=1)
    produce(bootstrap_servers, topic, mixed_records(4, 1))
    run_available_now(spark, bootstrap_servers, topic, str(tmp_path))
    rest = produce(bootstrap_servers, topic, mixed_records(10, 1))
    admin = AdminClient({"bootstrap.servers": bootstrap_servers})
    for f in admin.delete_records([TopicPartition(topic, 0, 8)]).values():
        f.result(30)
    if fail:
        with pytest.raises(Exception, match="failOnDataLoss"):
            run_available_now(spark, bootstrap_servers, topic, str(tmp_path))
    else:
        run_available_now(spark, bootstrap_servers, topic, str(tmp_path), fail_on_data_loss=False)
        assert [o for o, *_ in log_contents(str(tmp_path), topic, 0)] == [0, 1, 2, 3] + [s.offset for s in rest[4:]]


def test_record_the_log_cannot_take_is_set_aside_with_its_offset(tmp_path) -> None:
    n = 4
    batch = pa.RecordBatch.from_arrays([
        pa.array([b"k"] * n), pa.array([b"v"] * n), pa.array(["t"] * n), pa.array([0] * n, pa.int32()),
        pa.array([10, 11, 12, 13], pa.int64()),
        pa.array([1000, None, 3000, 4000], pa.int64()).cast(pa.timestamp("us", tz="UTC")),
        pa.array([0] * n, pa.int32()), pa.array([[]] * n, ARROW_SCHEMA.field("headers").type)],
        schema=ARROW_SCHEMA)
    stats = next(append_partitions(iter([batch]), AppendTask(str(tmp_path), {"t": LogConfig(fsync=False)}, now_ms=0))).to_pylist()
    assert stats == [{"topic": "t", "partition": 0, "appended": 3, "skipped": 0, "rolled": 0, "rejected": 1,
                      "odd_timestamps": 0, "log_end_offset": 14}]
    assert [o for o, *_ in log_contents(str(tmp_path), "t", 0)] == [10, 12, 13]
    rejected = _rejected(tmp_path)
    assert [r["offset"] for r in rejected] == [11] and "timestamp" in rejected[0]["reason"]


def test_record_with_a_null_header_key_is_set_aside_and_the_others_keep_their_headers(tmp_path) -> None:
    headers = [[{"key": "h", "value": b"1"}], [{"key": None, "value": b"2"}], [], [{"key": "h", "value": None}]]
    n = len(headers)
    batch = pa.RecordBatch.from_arrays([
        pa.array([b"k"] * n), pa.array([b"v"] * n), pa.array(["t"] * n), pa.array([0] * n, pa.int32()),
        pa.array([10, 11, 12, 13], pa.int64()),
        pa.array([1000] * n, pa.int64()).cast(pa.timestamp("us", tz="UTC")),
        pa.array([0] * n, pa.int32()), pa.array(headers, ARROW_SCHEMA.field("headers").type)], schema=ARROW_SCHEMA)
    stats = next(append_partitions(iter([batch]), AppendTask(str(tmp_path), {"t": LogConfig(fsync=False)}, now_ms=0))).to_pylist()
    assert (stats[0]["appended"], stats[0]["rejected"]) == (3, 1)
    assert [(o, h) for o, *_, h in log_contents(str(tmp_path), "t", 0)] == [
        (10, [{"key": "h", "value": b"1"}]), (12, []), (13, [{"key": "h", "value": None}])]
    rejected = _rejected(tmp_path)
    assert [r["offset"] for r in rejected] == [11] and "header" in rejected[0]["reason"]


def _rejected(tmp_path) -> list[dict]:
    directory = os.path.join(log_dir(open_state_dir(str(tmp_path)), "t", 0), REJECTED)
    return [json.loads(line) for name in sorted(os.listdir(directory)) for line in open(os.path.join(directory, name))]


def test_a_batch_of_several_partitions_goes_to_each_partitions_log(tmp_path) -> None:
    """The ingest source's batches hold one partition each; a batch from any other reader may mix them."""
    rows = [("t", 0, 10), ("u", 0, 20), ("t", 1, 30), ("t", 0, 11), ("u", 0, 21)]
    n = len(rows)
    batch = pa.RecordBatch.from_arrays([
        pa.array([b"k"] * n), pa.array([b"v"] * n), pa.array([t for t, _, _ in rows]),
        pa.array([p for _, p, _ in rows], pa.int32()), pa.array([o for *_, o in rows], pa.int64()),
        pa.array([1000] * n, pa.int64()).cast(pa.timestamp("us", tz="UTC")),
        pa.array([0] * n, pa.int32()), pa.array([[]] * n, ARROW_SCHEMA.field("headers").type)], schema=ARROW_SCHEMA)
    configs = {"t": LogConfig(fsync=False), "u": LogConfig(fsync=False)}
    stats = next(append_partitions(iter([batch, batch.slice(3, 1)]), AppendTask(str(tmp_path), configs, now_ms=0)))
    assert sorted((r["topic"], r["partition"], r["appended"], r["skipped"]) for r in stats.to_pylist()) == [
        ("t", 0, 2, 1), ("t", 1, 1, 0), ("u", 0, 2, 0)]
    assert [o for o, *_ in log_contents(str(tmp_path), "t", 0)] == [10, 11]
    assert [o for o, *_ in log_contents(str(tmp_path), "t", 1)] == [30]
    assert [o for o, *_ in log_contents(str(tmp_path), "u", 0)] == [20, 21]


def _spark_rows(topic: str, partition: int, offsets: list[int]) -> pa.RecordBatch:
    n = len(offsets)
    return pa.RecordBatch.from_arrays([
        pa.array([b"k%d" % o for o in offsets]), pa.array([b"v"] * n), pa.array([topic] * n),
        pa.array([partition] * n, pa.int32()), pa.array(offsets, pa.int64()),
        pa.array([1000] * n, pa.int64()).cast(pa.timestamp("us", tz="UTC")),
        pa.array([0] * n, pa.int32()), pa.array([[]] * n, ARROW_SCHEMA.field("headers").type)], schema=ARROW_SCHEMA)


def test_an_append_task_makes_all_its_logs_durable_with_two_barriers(tmp_path, monkeypatch) -> None:
    """Its objects, one barrier, its manifests, one more barrier (the micro-batch's offsets are committed after
    the task): two asks of the disk whatever its partition count, not an fsync of each object and manifest."""
    syncs = disk_syncs(monkeypatch)
    batches = [_spark_rows("t", p, [0, 1, 2]) for p in range(4)]
    stats = next(append_partitions(iter(batches), AppendTask(str(tmp_path), {"t": LogConfig()}, now_ms=0)))
    monkeypatch.undo()
    assert sorted((r["partition"], r["appended"]) for r in stats.to_pylist()) == [(p, 3) for p in range(4)]
    assert syncs == ["syncfs", "syncfs"]
    assert all([o for o, *_ in log_contents(str(tmp_path), "t", p)] == [0, 1, 2] for p in range(4))


def test_an_append_task_holding_its_bound_of_rows_appends_the_largest_share_first(tmp_path, monkeypatch) -> None:
    """A task reads hundreds of partitions' batches: what it holds stays under APPEND_ROWS, the largest share
    appended first, a partition's held batches appended as one, the rest at the task's end."""
    monkeypatch.setattr(append, "APPEND_ROWS", 5)
    appends: list[tuple[int, list[int]]] = []
    real = append.append_reporting_rejects

    def counted(plog: PartitionLog, batch: pa.RecordBatch, where: str, now_ms: int, audit_keys: AuditKeys
                ) -> AppendCounts:
        appends.append((int(where.rsplit("-", 1)[1]), batch.column("offset").to_pylist()))
        return real(plog, batch, where, now_ms, audit_keys)

    monkeypatch.setattr(append, "append_reporting_rejects", counted)
    # p0 is the largest when the bound is reached at p2's first batch; p2's later batches are held together, each
    # reaching the bound again (a count of held rows not lowered by an append would cut p2's rows in two)
    batches = [_spark_rows("t", 0, [0, 1, 2]), _spark_rows("t", 1, [0]), _spark_rows("t", 2, [0, 1]),
               _spark_rows("t", 2, [2]), _spark_rows("t", 2, [3])]
    stats = next(append_partitions(iter(batches), AppendTask(str(tmp_path), {"t": LogConfig(fsync=False)}, now_ms=0)))
    assert appends == [(0, [0, 1, 2]), (2, [0, 1, 2, 3]), (1, [0])]
    assert sorted((r["partition"], r["appended"]) for r in stats.to_pylist()) == [(0, 3), (1, 1), (2, 4)]


def test_an_append_task_fenced_at_its_commit_appends_its_records_again_to_the_log_as_it_now_is(
        tmp_path, monkeypatch) -> None:
    """Another writer of the log (an attempt of the task that Spark thought lost) committed while this one held
    its appends: this one's commit is refused, and it appends its records again, past what the other wrote."""
    monkeypatch.setattr(append, "APPEND_ROWS", 1)  # each batch appended as it comes

    def batches():
        yield _spark_rows("t", 0, [0, 1, 2])
        other = open_partition_log(open_state_dir(str(tmp_path)), LogDir.of(open_state_dir(str(tmp_path)),
                                                                            PartitionId("t", 0)), LogConfig(fsync=False))
        other.append(append.log_batch(_spark_rows("t", 0, [0, 1])), 0)
        yield _spark_rows("t", 0, [3, 4])

    stats = next(append_partitions(batches(), AppendTask(str(tmp_path), {"t": LogConfig(fsync=False)}, now_ms=0)))
    assert stats.to_pylist()[0]["log_end_offset"] == 5
    assert [o for o, *_ in log_contents(str(tmp_path), "t", 0)] == [0, 1, 2, 3, 4]


def test_an_append_task_that_finds_its_records_appended_already_syncs_them_before_it_ends(
        tmp_path, monkeypatch) -> None:
    """An earlier attempt committed them and died before its last barrier: they may sit in the page cache only,
    and Spark commits the batch's offsets once this attempt ends."""
    task = AppendTask(str(tmp_path), {"t": LogConfig()}, now_ms=0)
    next(append_partitions(iter([_spark_rows("t", 0, [0, 1, 2])]), task))
    syncs = []
    monkeypatch.setattr(storage, "syncfs", lambda fd: syncs.append("syncfs"))
    stats = next(append_partitions(iter([_spark_rows("t", 0, [0, 1, 2])]), task)).to_pylist()
    assert (stats[0]["appended"], stats[0]["skipped"]) == (0, 3)
    assert syncs == ["syncfs"]
