"""The batch fetch: a consumer's records as Arrow columns, off confluent-kafka's own handle. The oracle is what
was produced: keys and values (null ones too), timestamps, headers (a null value, repeats, none at all), over
partitions that interleave, split into batches by count and by bytes without losing or repeating a record."""

from __future__ import annotations

import uuid

import numpy as np
import pytest
from confluent_kafka import Consumer, KafkaError, TopicPartition

from streaming.kafka.source import batch_fetch
from streaming.kafka.source.batch_fetch import BatchFetch
from streaming.kafka.source.fetched import FetchError, Fetched, Run
from streaming.kafka.native.gate import DEFAULT_CLIENT_ID, HandleNotFound
from tests.kafka_helpers import Sent, produce


def _consumer(bootstrap_servers: str, **extra) -> Consumer:
    return Consumer({"bootstrap.servers": bootstrap_servers, "group.id": uuid.uuid4().hex,
                     "enable.auto.commit": False, **extra})


def _sent(partitions: int, count: int) -> list[Sent]:
    out = []
    for i in range(count):
        headers = [] if i % 3 else [("trace", b"t%d" % i), ("empty", None), ("trace", b"")]
        out.append(Sent(i % partitions, None if i % 7 == 3 else b"k%d" % i, None if i % 5 == 4 else b"v" * (i % 50),
                        1_000 + i, headers))
    return out


def _headers(fetched: Fetched) -> list[list[tuple[str, bytes | None]]]:
    h = fetched.headers
    if h is None:
        return [[]] * len(fetched)
    lists = np.frombuffer(h.lists, np.int32)
    names, values = h.names.to_pylist(), h.values.to_pylist()
    return [list(zip(names[a:b], values[a:b], strict=True)) for a, b in zip(lists[:-1], lists[1:], strict=True)]


def _read_all(fetch: BatchFetch, expected: int, max_records: int) -> dict[tuple[str, int], list[tuple]]:
    got: dict[tuple[str, int], list[tuple]] = {}
    seen = 0
    while seen < expected:
        fetched = fetch.fetch(max_records, timeout_s=5.0)
        assert fetched is not None, f"only {seen} of {expected} records came"
        assert len(fetched) <= max_records
        headers = _headers(fetched)
        for event in fetched.events:
            assert isinstance(event, Run), event
            for i in range(event.start, event.stop):
                got.setdefault((event.topic, event.partition), []).append(
                    (int(fetched.offsets[i]), fetched.keys[i].as_py(), fetched.values[i].as_py(),
                     int(fetched.timestamps[i]), int(fetched.timestamp_types[i]),
                     headers[i]))
        seen += len(fetched)
    return got


@pytest.mark.integration
@pytest.mark.parametrize("max_records, max_bytes", [(10_000, batch_fetch.MAX_BATCH_BYTES), (7, 100)],
                         ids=["whole", "split-by-count-and-bytes"])
def test_every_record_comes_once_with_its_columns(bootstrap_servers, new_topic, monkeypatch, max_records,
                                                  max_bytes) -> None:
    monkeypatch.setattr(batch_fetch, "MAX_BATCH_BYTES", max_bytes)
    topic = new_topic(partitions=3)
    sent = produce(bootstrap_servers, topic, _sent(3, 600))
    consumer = _consumer(bootstrap_servers)
    fetch = BatchFetch(consumer, DEFAULT_CLIENT_ID, 64)
    try:
        for p in range(3):
            fetch.forward(topic, p)
        consumer.assign([TopicPartition(topic, p, 0) for p in range(3)])
        got = _read_all(fetch, len(sent), max_records)
        assert consumer.poll(0.2) is None, "no record reaches the consumer's own queue"
        positions = {tp.partition: tp.offset for tp in consumer.position([TopicPartition(topic, p) for p in range(3)])}
    finally:
        fetch.close()
        consumer.close()
    for p in range(3):
        mine = [s for s in sent if s.partition == p]
        assert got[(topic, p)] == [(s.offset, s.key, s.value, s.timestamp, 1, s.headers) for s in mine]
        assert positions[p] == mine[-1].offset + 1, "the consumer's position follows what was fetched"


@pytest.mark.integration
def test_an_offset_out_of_range_comes_as_the_partitions_error(bootstrap_servers, new_topic) -> None:
    topic = new_topic()
    produce(bootstrap_servers, topic, _sent(1, 5))
    consumer = _consumer(bootstrap_servers, **{"auto.offset.reset": "error"})
    fetch = BatchFetch(consumer, DEFAULT_CLIENT_ID, 64)
    try:
        fetch.forward(topic, 0)
        consumer.assign([TopicPartition(topic, 0, 50)])
        fetched = fetch.fetch(1, timeout_s=10.0)
    finally:
        fetch.close()
        consumer.close()
    assert fetched is not None and len(fetched) == 0
    [event] = fetched.events
    assert isinstance(event, FetchError) and (event.topic, event.partition) == (topic, 0)
    # what librdkafka reports when auto.offset.reset=error, as confluent-kafka's consume() gives it
    assert event.error.code() == KafkaError._AUTO_OFFSET_RESET and "Offset out of range" in event.error.str()


def test_a_handle_that_is_not_the_named_consumers_is_refused() -> None:
    consumer = Consumer({"bootstrap.servers": "127.0.0.1:9", "group.id": "g", "client.id": "mine"})
    try:
        with pytest.raises(HandleNotFound, match="does not keep its librdkafka handle"):
            BatchFetch(consumer, "someone-else", 8)
        BatchFetch(consumer, "mine", 8).close()
    finally:
        consumer.close()


@pytest.mark.integration
def test_records_that_reached_the_consumers_queue_before_the_forward_come_first_each_once(bootstrap_servers,
                                                                                          new_topic) -> None:
    """The race after restart(): librdkafka started the partition's fetch before its forward was made again, so
    its first records went to the consumer's own queue. Forced here: the partition is assigned unforwarded and
    one record consumed, which leaves the rest of that fetch on the consumer's queue; then the forward is made.
    Those records come first, then the ones fetched since, each once, in order."""
    topic = new_topic()
    produce(bootstrap_servers, topic, _sent(1, 10))
    consumer = _consumer(bootstrap_servers, **{"auto.offset.reset": "error"})
    fetch = BatchFetch(consumer, DEFAULT_CLIENT_ID, 64)
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        [first] = consumer.consume(1, timeout=10)
        assert first.offset() == 0
        fetch.forward(topic, 0)
        produce(bootstrap_servers, topic, _sent(1, 10))
        offsets: list[int] = []
        while len(offsets) < 19:
            fetched = fetch.fetch(64, timeout_s=5.0)
            assert fetched is not None, f"only {offsets} came"
            assert all(isinstance(event, Run) for event in fetched.events)
            offsets += fetched.offsets.tolist()
    finally:
        fetch.close()
        consumer.close()
    assert offsets == list(range(1, 20))
