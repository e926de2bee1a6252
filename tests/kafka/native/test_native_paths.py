"""The native path held to the plain path on a real broker, by random batches (hypothesis): null keys and
values, empty values, values up to 1 MiB, 0 to 20 headers with null values and repeated names, non-ASCII
bytes, tombstones, records that name their origin themselves (kcompact.origin, with a value or null).

Fetch: the source's Arrow columns read through the C extension equal those read through confluent-kafka's
consume(), record for record, and both equal what was produced. Produce: what a plain consumer reads back of a
log batch produced through the C extension equals what it reads of the same batch produced through
produce(), and both are the log's records with their headers, kcompact.offset and (unless they name one
themselves) kcompact.origin. The log's headers go in as
the log writes them and also in Avro's block form (tests/log/test_header_encoding.py holds the Python readers to
each other).
"""

from __future__ import annotations

import dataclasses
import uuid

import pyarrow as pa
import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from hypothesis import HealthCheck, given, settings, strategies as st

from streaming.kafka.sink.batch_produce import BatchProduce
from streaming.kafka.sink.held_buffers import HeldBuffers
from streaming.kafka.native.gate import DEFAULT_CLIENT_ID
from streaming.kafka.headers.offset_header import OFFSET_HEADER, encode
from streaming.kafka.headers.origin_header import ORIGIN_HEADER
from streaming.kafka.sink.plain_produce import PlainProduce
from streaming.kafka.sink.record_produce import Columns, RecordProduce
from streaming.log import batch_from_records, make_record
from streaming.log.columns import header_pairs
from streaming.spark.source import kafka_source
from streaming.spark.source.columns import ARROW_SCHEMA
from streaming.spark.source.options import KafkaSourceOptions
from streaming.spark.source.range_read import OffsetRange
from tests.kafka_helpers import ORIGINS, Sent
from tests.log.test_header_encoding import in_blocks

pytestmark = pytest.mark.integration

BIG = 4 << 20  # the topics' and clients' record size limit: room for a 1 MiB value with its headers
EXAMPLES = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                          HealthCheck.function_scoped_fixture,
                                                                          HealthCheck.data_too_large])

_bytes = st.one_of(st.binary(max_size=40), st.just(b""),
                   st.builds(lambda n, b: bytes([b]) * n, st.sampled_from([1 << 20, 65_537]) | st.integers(0, 1 << 20),
                             st.integers(0, 255)))
# Names as UTF-8 text: librdkafka hands a header's name over as a C string, cut at a NUL whichever path reads
# it, and confluent-kafka's produce() crashes on a name that is no UTF-8 (a lone surrogate)
_names = st.sampled_from(["trace", "trace", "тип", "ключ-✓", "", "h" * 300, "v", ORIGIN_HEADER]) | \
    st.text(st.characters(blacklist_characters="\x00", blacklist_categories=("Cs",)), max_size=12)
_header = st.tuples(_names, st.none() | st.binary(max_size=30))
_record = st.tuples(st.none() | st.binary(max_size=30), st.none() | _bytes, st.lists(_header, max_size=20),
                    st.integers(1, 1_700_000_000_000))  # 0 is "now" to produce(); none ahead of the broker's clock


def _small(records: list) -> bool:
    """A batch a test producer and broker take: under the record size limit, a few MiB in all."""
    return sum(len(v or b"") for _, v, _, _ in records) < 6 << 20


_batches = st.lists(_record, min_size=1, max_size=40).filter(_small)


@pytest.fixture(scope="module")
def big_topic(bootstrap_servers, new_topic_module) -> str:
    return new_topic_module(partitions=2, config={"max.message.bytes": str(BIG)})


@pytest.fixture(scope="module")
def new_topic_module(bootstrap_servers):
    from streaming.kafka.admin import create_topic, unique_topic_name

    def make(partitions: int, config: dict) -> str:
        return create_topic(bootstrap_servers, unique_topic_name("native"), partitions,
                            {"retention.ms": "-1", **config})
    return make


def _read(bootstrap_servers: str, topic: str, ranges: list[OffsetRange], native: bool) -> pa.Table:
    """The ranges' records through the source, each partition's in offset order (how partitions interleave
    depends on the fetches' timing)."""
    options = dataclasses.replace(KafkaSourceOptions.parse({"kafka.bootstrap.servers": bootstrap_servers,
                                                            "subscribe": topic,
                                                            "kafka.fetch.max.bytes": str(4 * BIG),
                                                            "kafka.receive.message.max.bytes": str(8 * BIG)}),
                                  records_per_batch=7, kafka_native=native)
    table = pa.Table.from_batches(list(kafka_source.read_ranges(options, ranges)), ARROW_SCHEMA)
    return table.sort_by([("partition", "ascending"), ("offset", "ascending")])


@pytest.mark.parametrize("interleaved", [False, True], ids=["one-partition", "two-partitions"])
@EXAMPLES
@given(records=_batches)
def test_fetch_columns_are_the_same_through_either_path(bootstrap_servers, big_topic, records, interleaved) -> None:
    sent = [Sent(i % 2 if interleaved else 0, k, v, ts, h) for i, (k, v, h, ts) in enumerate(records)]
    producer = Producer({"bootstrap.servers": bootstrap_servers, "message.max.bytes": BIG, "linger.ms": 2})
    for s in sent:
        producer.produce(big_topic, key=s.key, value=s.value, partition=s.partition, timestamp=s.timestamp,
                         headers=s.headers or None,
                         on_delivery=lambda err, msg, s=s: setattr(s, "offset", msg.offset()) if err is None else None)
    assert producer.flush(30) == 0 and all(s.offset >= 0 for s in sent)
    ranges = [OffsetRange(big_topic, p, min(s.offset for s in mine), max(s.offset for s in mine) + 1)
              for p in (0, 1) if (mine := [s for s in sent if s.partition == p])]
    natively, plainly = (_read(bootstrap_servers, big_topic, ranges, native) for native in (True, False))
    assert natively.equals(plainly), "the native fetch's columns equal consume()'s"
    order = {(s.partition, s.offset): s for s in sent}
    micros = natively.column("timestamp").cast(pa.int64()).to_pylist()
    got = natively.to_pylist()
    assert len(got) == len(sent)
    for row, us in zip(got, micros, strict=True):
        s = order[(row["partition"], row["offset"])]
        assert (row["key"], row["value"], us // 1000, row["headers"]) == \
            (s.key, s.value, s.timestamp, [{"key": k, "value": v} for k, v in s.headers])


def _read_back(bootstrap_servers: str, topic: str, partition: int, count: int) -> list[tuple]:
    consumer = Consumer({"bootstrap.servers": bootstrap_servers, "group.id": uuid.uuid4().hex,
                         "enable.auto.commit": False, "fetch.max.bytes": 4 * BIG,
                         "receive.message.max.bytes": 8 * BIG})
    consumer.assign([TopicPartition(topic, partition, 0)])
    got: list[tuple] = []
    try:
        while len(got) < count:
            msgs = consumer.consume(count - len(got), timeout=10.0)
            assert msgs, f"only {len(got)} of {count} records came back"
            assert all(m.error() is None for m in msgs)
            got += [(m.key(), m.value(), m.timestamp()[1], m.headers() or []) for m in msgs]
    finally:
        consumer.close()
    return got


@EXAMPLES
@given(records=_batches, blocks=st.none() | st.tuples(st.lists(st.integers(1, 5), max_size=4),
                                                       st.lists(st.booleans(), max_size=4)),
       cut=st.integers(0, 40))
def test_produced_records_are_the_same_through_either_path(bootstrap_servers, new_topic_module, records, blocks,
                                                           cut) -> None:
    topic = new_topic_module(partitions=2, config={"max.message.bytes": str(BIG)})
    log = [make_record(1_000 + 3 * i, k, v, ts, h) for i, (k, v, h, ts) in enumerate(records)]
    batch = batch_from_records(log)
    if blocks is not None:  # Avro's block form, which the log's writer never uses and other writers may
        batch = batch.set_column(batch.schema.get_field_index("headers"), "headers",
                                 pa.array([in_blocks(h, *blocks) for _, _, h, _ in records], pa.binary()))
    assert [header_pairs(h) for h in batch.column("headers").to_pylist()] == [h for _, _, h, _ in records]
    producer = Producer({"bootstrap.servers": bootstrap_servers, "transactional.id": uuid.uuid4().hex,
                         "message.max.bytes": BIG, "queue.buffering.max.messages": 8, "linger.ms": 1})
    producer.init_transactions(30)
    cols = Columns.of(batch)
    split = min(cut, len(log))
    paths: list[RecordProduce] = [BatchProduce(HeldBuffers(producer), DEFAULT_CLIENT_ID, topic, 0, ORIGINS),
                                  PlainProduce(producer, topic, 1, ORIGINS)]
    producer.begin_transaction()
    for path in paths:  # in two runs each, through a queue smaller than the batch
        path.produce_all(cols, 0, split, serve=0.05)
        path.produce_all(cols, split, len(log), serve=0.05)
    producer.commit_transaction(30)
    natively, plainly = (_read_back(bootstrap_servers, topic, p, len(log)) for p in (0, 1))
    assert natively == plainly
    assert natively == [(r["key"], r["value"], r["timestamp"],
                         ORIGINS.sink_headers([*((h["key"], h["value"]) for h in r["headers"]),
                                               (OFFSET_HEADER, encode(r["offset"]))]))
                        for r in log]
