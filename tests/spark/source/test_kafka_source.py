"""The source's partition reads: their consumers' settings, many partitions' ranges read together by one task's
consumer, each exactly, and a read that gets no records says why it waits while it waits, and gives up, naming
the option, at kafkaConsumer.pollTimeoutMs."""

from __future__ import annotations

import dataclasses
import logging

import pytest

from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient

from streaming.spark.source import kafka_source, range_read
from streaming.spark.source.range_read import DataLossError, OffsetRange
from streaming.spark.source.options import KafkaSourceOptions
from streaming.kafka.admin import create_topic
from tests.e2e.helpers import wait_for
from tests.kafka_helpers import Sent, produce


@pytest.mark.integration
def test_a_read_that_gets_no_records_says_it_waits_and_stops_at_the_poll_timeout(
        bootstrap_servers, new_topic, caplog, monkeypatch) -> None:
    topic = new_topic()
    produce(bootstrap_servers, topic, [Sent(0, b"k%d" % i, b"v", 1_000 + i) for i in range(10)])
    options = dataclasses.replace(KafkaSourceOptions.parse({"kafka.bootstrap.servers": bootstrap_servers,
                                                            "subscribe": topic}), poll_timeout_ms=4_000)
    monkeypatch.setattr(range_read, "SAY_EVERY_S", 1.0)
    caplog.set_level(logging.WARNING, logger=range_read.__name__)
    with pytest.raises(TimeoutError, match=rf"{topic}-0: no progress from offset 10 towards 20 .*pollTimeoutMs=4000"):
        list(kafka_source.read_partition(options, topic, 0, 0, 20))  # 10 records past the log's end
    waits = [r.getMessage() for r in caplog.records if "waiting for the source cluster" in r.getMessage()]
    assert waits and all(f"partition {topic}-0 gave no records from offset 10" in w for w in waits), waits
    assert len(waits) <= 4, "one line a second, not one per poll"


def test_the_source_fetches_large_and_soon_unless_the_user_says_otherwise() -> None:
    options = KafkaSourceOptions.parse({"kafka.bootstrap.servers": "127.0.0.1:9", "subscribe": "t"})
    config = kafka_source.consumer_config(options)
    assert config["max.partition.fetch.bytes"] == str(8 << 20) and config["fetch.queue.backoff.ms"] == "10"
    assert config["enable.auto.commit"] is False and config["group.id"].startswith("kcompact-source-")
    mine = KafkaSourceOptions.parse({"kafka.bootstrap.servers": "127.0.0.1:9", "subscribe": "t",
                                     "kafka.max.partition.fetch.bytes": "1048576", "kafka.fetch.queue.backoff.ms": "1000"})
    config = kafka_source.consumer_config(mine)
    assert config["max.partition.fetch.bytes"] == "1048576" and config["fetch.queue.backoff.ms"] == "1000"


@pytest.mark.integration
def test_one_consumer_reads_many_partitions_ranges_together_each_exactly(bootstrap_servers, new_topic) -> None:
    """A task's ranges: some whole, one ending mid-partition, one of two topics, one empty; records of a range
    that ended are not taken, however the fetches interleave."""
    a, b = new_topic(partitions=4), new_topic(partitions=1)
    for topic, parts in ((a, 4), (b, 1)):
        produce(bootstrap_servers, topic, [Sent(i % parts, b"k%d" % i, b"v", 1_000 + i) for i in range(4_000)])
    per = 4_000 // 4
    ranges = [OffsetRange(a, 0, 0, per), OffsetRange(a, 1, 10, 20), OffsetRange(a, 2, 0, per),
              OffsetRange(a, 3, per, per), OffsetRange(b, 0, 100, 4_000)]
    options = dataclasses.replace(KafkaSourceOptions.parse({"kafka.bootstrap.servers": bootstrap_servers,
                                                            "subscribe": a}), records_per_batch=300)
    got: dict[tuple[str, int], list[int]] = {}
    for batch in kafka_source.read_ranges(options, ranges):
        assert batch.num_rows <= 300 * len(ranges)
        for t, p, o in zip(*(batch.column(c).to_pylist() for c in ("topic", "partition", "offset")), strict=True):
            got.setdefault((t, p), []).append(o)
    assert got == {(r.topic, r.partition): list(range(r.start, r.end)) for r in ranges if r.end > r.start}


@pytest.mark.integration
@pytest.mark.parametrize("fail", [True, False])
def test_records_deleted_between_the_log_start_lookup_and_the_fetch_are_data_loss_per_fail_on_data_loss(
        bootstrap_servers, new_topic, monkeypatch, fail: bool) -> None:
    """Retention racing a read: the log starts were looked up, then the leader dropped one range's first
    records before they were fetched. That is data loss, as when they were gone before the lookup, not a task
    failure; the task's other range reads on, whatever its fetches brought beside the error."""
    topic = new_topic(partitions=2)
    produce(bootstrap_servers, topic, [Sent(i % 2, b"k%d" % i, b"v", 1_000 + i) for i in range(40)])
    assign = range_read.RangeRead._assign
    admin = AdminClient({"bootstrap.servers": bootstrap_servers})
    deleted: set[str] = set()

    def deleting_first(self) -> None:
        if topic not in deleted:
            deleted.add(topic)
            admin.delete_records([TopicPartition(topic, 0, 8)])[TopicPartition(topic, 0, 8)].result(30)
        assign(self)

    monkeypatch.setattr(range_read.RangeRead, "_assign", deleting_first)
    options = dataclasses.replace(KafkaSourceOptions.parse({"kafka.bootstrap.servers": bootstrap_servers,
                                                            "subscribe": topic}), fail_on_data_loss=fail)
    ranges = [OffsetRange(topic, 0, 2, 20), OffsetRange(topic, 1, 0, 20)]
    if fail:
        with pytest.raises(DataLossError, match=rf"partition {topic}-0: offset 2 is out of range.*failOnDataLoss"):
            list(kafka_source.read_ranges(options, ranges))
        return
    got: dict[int, list[int]] = {0: [], 1: []}
    for batch in kafka_source.read_ranges(options, ranges):
        for p, o in zip(batch.column("partition").to_pylist(), batch.column("offset").to_pylist(), strict=True):
            got[p].append(o)
    assert got == {0: list(range(8, 20)), 1: list(range(20))}


@pytest.mark.integration
@pytest.mark.parametrize("fail", [True, False])
def test_a_topic_deleted_and_recreated_after_planning_skips_the_range_per_fail_on_data_loss(
        bootstrap_servers, new_topic, monkeypatch, caplog, fail: bool) -> None:
    """The range was planned on the old topic; the new one ends below where the read starts. As Spark's own
    source does, the rest of the range is skipped (a WARNING) or the task fails, never a read that restarts the
    partition at the same offset again and again."""
    topic = new_topic()
    produce(bootstrap_servers, topic, [Sent(0, b"k%d" % i, b"v", 1_000 + i) for i in range(20)])
    admin = AdminClient({"bootstrap.servers": bootstrap_servers})
    assign = range_read.RangeRead._assign

    def recreating_first(self) -> None:
        admin.delete_topics([topic])[topic].result(30)
        wait_for(lambda: topic not in admin.list_topics(timeout=10).topics, 30, "the topic gone")
        wait_for(lambda: _created(bootstrap_servers, topic), 30, "the topic made again")
        produce(bootstrap_servers, topic, [Sent(0, b"n%d" % i, b"v", 1_000 + i) for i in range(3)])
        assign(self)

    monkeypatch.setattr(range_read.RangeRead, "_assign", recreating_first)
    options = dataclasses.replace(KafkaSourceOptions.parse({"kafka.bootstrap.servers": bootstrap_servers,
                                                            "subscribe": topic}), fail_on_data_loss=fail,
                                  poll_timeout_ms=30_000)
    caplog.set_level(logging.WARNING, logger=range_read.__name__)
    if fail:
        with pytest.raises(DataLossError, match=rf"partition {topic}-0: offset 10 is past the log end 3 .*failOnDataLoss"):
            list(kafka_source.read_partition(options, topic, 0, 10, 20))
        return
    assert list(kafka_source.read_partition(options, topic, 0, 10, 20)) == []
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 1 and "offset 10 is past the log end 3 (the topic deleted and re-created?): offsets [10, 20) " \
        "are gone" in said[0] and "failOnDataLoss=false: going on" in said[0], said


def _created(bootstrap_servers: str, topic: str) -> bool:
    """A topic of that name made again: refused while the broker still deletes the old one."""
    try:
        create_topic(bootstrap_servers, topic, 1, {"retention.ms": "-1"})
    except Exception:  # noqa: BLE001 (TOPIC_ALREADY_EXISTS until the deletion is done)
        return False
    return True
