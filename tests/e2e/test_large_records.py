"""Records of several MB, end to end: a sink topic takes what its source takes (the job sizes its producer by
the sink topics' max.message.bytes, not librdkafka's 1,000,000 bytes), and a record bigger than its sink allows
stops its own partition only, named in one line, while the others keep flowing."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

from tests.e2e.helpers import assert_sink_contract, read_topic, run_once, wait_for
from tests.e2e.running_job import RunningJob
from tests.kafka_helpers import Sent
from streaming.kafka.admin import unique_topic_name

pytestmark = pytest.mark.integration

LIMIT = 5_242_880  # the source topic's max.message.bytes: 5 MiB, as many clusters raise it to
CONFIG = ("max.compaction.lag.ms=1000", "min.cleanable.dirty.ratio=0.1")
HOUR = 3_600_000


def _produce(bootstrap: str, topic: str, records: list[Sent]) -> list[Sent]:
    """As tests.kafka_helpers.produce, by a producer that takes records up to the topic's limit."""
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "message.max.bytes": 2 * LIMIT})

    def filled(record: Sent):
        def done(err, msg) -> None:
            assert err is None, err
            record.offset = msg.offset()
        return done
    for r in records:
        producer.produce(topic, key=r.key, value=r.value, partition=r.partition, timestamp=r.timestamp,
                         on_delivery=filled(r))
    assert producer.flush(60) == 0
    return records


def _records(partition: int, sizes: list[int], start: int = 0) -> list[Sent]:
    past = int(time.time() * 1000) - 2 * HOUR
    return [Sent(partition, b"k%d-%d" % (partition, start + i), bytes([65 + i % 26]) * size, past + start + i)
            for i, size in enumerate(sizes)]


def test_records_of_half_one_and_three_mb_reach_a_sink_that_takes_five(spark, bootstrap_servers, new_topic,
                                                                       tmp_path) -> None:
    src, sink = new_topic(config={"max.message.bytes": str(LIMIT)}), unique_topic_name("sink")
    sent = _produce(bootstrap_servers, src, _records(0, [100, 500_000, 1_020_000, 3_000_000, 100]))
    assert run_once(bootstrap_servers, src, sink, str(tmp_path), *CONFIG, extra=("--drain",)) == 0
    assert_sink_contract(bootstrap_servers, sink, sent, 1)
    assert sorted(len(r["value"]) for r in read_topic(bootstrap_servers, sink, 1)[0]) == \
        [100, 100, 500_000, 1_020_000, 3_000_000]


def test_a_record_bigger_than_its_sink_allows_stops_only_its_partition(bootstrap_servers, new_topic,
                                                                       tmp_path) -> None:
    src, sink = new_topic(partitions=2, config={"max.message.bytes": str(LIMIT)}), unique_topic_name("sink")
    stopped = _produce(bootstrap_servers, src, _records(0, [100, 100, 3_000_000, 100]))
    _produce(bootstrap_servers, src, _records(1, [100] * 5))
    with RunningJob(bootstrap_servers, src, sink, tmp_path, *CONFIG,
                    extra=("--sink-topic-config", "max.message.bytes=2000000")) as job:
        wait_for(lambda: job.running() or _sink_offsets(bootstrap_servers, sink) == {0: [0, 1], 1: [0, 1, 2, 3, 4]},
                 180, "the other partition's records, and the stopped one's before the big one")
        said = lambda: [x for x in job.lines_since(0) if "ERROR" in x and "offset 2 (3,000,1" in x]  # noqa: E731
        wait_for(lambda: job.running() or said(), 60, "a line naming the record")
        job.running()
        job.stop()
    assert len(said()) == 1 and f"{src}-0" in said()[0], said()
    assert _sink_offsets(bootstrap_servers, sink) == {0: [0, 1], 1: [0, 1, 2, 3, 4]}, [s.offset for s in stopped]


def _sink_offsets(bootstrap: str, sink: str, partitions: int = 2) -> dict[int, list[int]]:
    return {p: [r["source_offset"] for r in records] for p, records in read_topic(bootstrap, sink, partitions).items()}


def test_a_tombstone_past_its_horizon_while_emission_stalls_still_reaches_the_sink(spark, bootstrap_servers,
                                                                                   new_topic, tmp_path) -> None:
    """delete.retention.ms=1: the tombstone's horizon passes at once, and emission stalls behind a record its sink
    refuses for two runs, each with a cleaning pass. Once the sink takes the record, the tombstone follows it:
    the log kept it for the sink, and the DR site does not keep the deleted key's old value."""
    src, sink = new_topic(config={"max.message.bytes": str(LIMIT)}), unique_topic_name("sink")
    small = ("--sink-topic-config", "max.message.bytes=2000000")
    config = (*CONFIG, "delete.retention.ms=1")
    sent = _produce(bootstrap_servers, src, [Sent(0, b"deleted", b"old value", int(time.time() * 1000) - 2 * HOUR)])
    assert run_once(bootstrap_servers, src, sink, str(tmp_path), *config, extra=("--drain", *small)) == 0
    assert _sink_offsets(bootstrap_servers, sink, 1)[0] == [0]
    sent += _produce(bootstrap_servers, src, _records(0, [3_000_000], 1) +
                     [Sent(0, b"deleted", None, int(time.time() * 1000) - 2 * HOUR + 2)])
    for more in range(2):  # two runs, each with a pass over new records, emission stopped at the big one
        sent += _produce(bootstrap_servers, src, _records(0, [10], 3 + more))
        run_once(bootstrap_servers, src, sink, str(tmp_path), *config, extra=small)
        assert _sink_offsets(bootstrap_servers, sink, 1)[0] == [0], "stalled behind the big record"
    admin = AdminClient({"bootstrap.servers": bootstrap_servers})
    resource = ConfigResource(ConfigResource.Type.TOPIC, sink, incremental_configs=[ConfigEntry(
        "max.message.bytes", str(LIMIT + 1024), incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([resource])[resource].result(30)
    assert run_once(bootstrap_servers, src, sink, str(tmp_path), *config, extra=("--drain",)) == 0
    last = {r["key"]: r["value"] for r in read_topic(bootstrap_servers, sink, 1)[0]}
    assert last[b"deleted"] is None, "the deleted key's last record in the sink is its tombstone"
