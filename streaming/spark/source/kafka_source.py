"""A Spark Structured Streaming source for Kafka on the Python Data Source API and confluent-kafka.

Spark's JVM Kafka connector cannot be installed here, so this source speaks its language instead: the
same columns (key, value, topic, partition, offset, timestamp, timestampType, headers) and options
(kafka.bootstrap.servers, subscribe, startingOffsets, maxOffsetsPerTrigger, failOnDataLoss, kafka.*).
Offsets live in Spark's checkpoint; each topic-partition with records to read is one input partition (with
maxReadTasks, many share one: range_read), read on an executor by a consumer created there (the reader
object is pickled, so it never holds a client) and returned as Arrow record batches, Spark's fast path for
Python sources.
"""

from __future__ import annotations

import logging
import os
import uuid
from typing import Iterator, Sequence

import pyarrow as pa
from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (ReadAllAvailable, ReadLimit, ReadMaxRows,
                                              SupportsTriggerAvailableNow)

from streaming.job.balance import spread
from streaming.kafka.admin import watermarks
from streaming.kafka.native import gate
from streaming.kafka.source.batch_fetch import BatchFetch
from streaming.kafka.source.fetched import RecordFetch
from streaming.kafka.source.plain_fetch import PlainFetch
from streaming.kafka.client_settings import client_settings
from streaming.kafka.failures import TRY_S, retrying
from streaming.configuration.subscription import EARLIEST, LATEST, Subscribe, SubscribePattern
from streaming.partition_id import PartitionId
from streaming.runtime.logging_setup import configure_worker
from streaming.spark.source.columns import SCHEMA_DDL
from streaming.spark.source.range_read import OffsetRange, RangeRead, data_loss
from streaming.spark.source.offsets import Offsets, flatten, nest, rate_limit
from streaming.spark.source.options import KafkaSourceOptions, SourceOptionError
from streaming.job.task import prepare_task

log = logging.getLogger(__name__)

SOURCE_NAME = "kcompact-kafka"
# librdkafka stops fetching a partition whose queue of fetched records is full and, by default, waits a whole
# second (fetch.queue.backoff.ms=1000) before it fetches again, however soon the queue drains: a reader that
# keeps up spent most of its time in that wait (bench/README.md). A kafka.* option given by the user wins.
FETCH_QUEUE_BACKOFF_MS = "10"
# A read asks for a whole partition range at once, so fetches of 8 MiB a partition instead of librdkafka's 1 MiB:
# an eighth of the fetch requests for the broker and the client to handle (bench/README.md). A kafka.* option wins.
MAX_PARTITION_FETCH_BYTES = str(8 << 20)

TopicPartitionKey = tuple[str, int]


class KafkaInputPartition(InputPartition):
    """The ranges one task reads, one after another with one consumer: with maxReadTasks, the small ranges of
    many partitions share a task (streaming.job.balance)."""

    def __init__(self, ranges: Sequence[OffsetRange]) -> None:
        super().__init__(tuple(ranges))
        self.ranges = tuple(ranges)


def consumer_config(options: KafkaSourceOptions) -> dict:
    """The source's librdkafka settings: its own defaults, the user's kafka.* options over them, and what
    the source's reads depend on over both."""
    return {"fetch.queue.backoff.ms": FETCH_QUEUE_BACKOFF_MS, "max.partition.fetch.bytes": MAX_PARTITION_FETCH_BYTES,
            **options.client_config, "group.id": f"kcompact-source-{uuid.uuid4().hex}", "enable.auto.commit": False,
            "auto.offset.reset": "error", "enable.partition.eof": False}


def _consumer(options: KafkaSourceOptions) -> Consumer:
    return Consumer(client_settings(consumer_config(options)))


class KafkaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: KafkaSourceOptions) -> None:
        self.options = options
        self._target: dict[TopicPartitionKey, int] | None = None
        self._client: Consumer | None = None
        self._admin: AdminClient | None = None
        self._planner_parent: int | None = None

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["_client"] = state["_admin"] = None  # clients never travel to executors
        return state

    # ----- driver side: offsets ----------------------------------------------------------------------------

    def _metadata(self) -> Consumer:
        if self._client is None:  # first call in the process Spark runs the source's driver side in
            configure_worker([self.options.client_config])
            self._client = _consumer(self.options)
            self._planner_parent = os.getppid()
        return self._client

    def _orphaned(self) -> bool:
        """The JVM that started this planning process is gone (a job SIGKILLed): nobody waits for an answer,
        so a call that waits on an unreachable cluster ends now instead of at the end of its retries."""
        return self._planner_parent is not None and os.getppid() != self._planner_parent

    def _retrying(self, call, what: str, topic: str | None = None):
        """Driver-side metadata calls ride out a broker that is away for up to kafkaConsumer.pollTimeoutMs,
        asking for ``topic``'s metadata anew between tries."""
        return retrying(call, what, self.options.poll_timeout_ms / 1000, side="source",
                        client=self._metadata() if topic else None, topic=topic, abandoned=self._orphaned)

    def _topic_partitions(self) -> list[TopicPartitionKey]:
        md = self._retrying(lambda: self._metadata().list_topics(timeout=TRY_S),
                            f"metadata from {self.options.bootstrap_servers}")
        out = []
        subscription = self.options.subscription
        if isinstance(subscription, SubscribePattern):  # topics created later that match are picked up here
            for topic in sorted(md.topics):
                t = md.topics[topic]
                if subscription.matches(topic) and t.error is None:
                    out.extend((topic, p) for p in sorted(t.partitions))
            return out
        for topic in subscription.names:
            t = md.topics.get(topic)
            if t is None or t.error is not None:
                reason = t.error.str() if t is not None and t.error is not None else "not in cluster metadata"
                raise SourceOptionError(f"subscribed topic {topic!r} does not exist on "
                                        f"{self.options.bootstrap_servers} ({reason})")
            out.extend((topic, p) for p in sorted(t.partitions))
        return out

    def _watermarks(self, tps: Sequence[TopicPartitionKey]) -> dict[TopicPartitionKey, tuple[int, int]]:
        """Every partition's (log start, end) in one request per leader, however many partitions: the end is
        the last stable offset when reading committed records, as the consumer's own reads see it."""
        if not tps:
            return {}

        def renew() -> None:  # a client that asked a leader that moved looks the leaders up afresh
            self._admin = AdminClient(client_settings(self.options.client_config))

        if self._admin is None:
            renew()
        committed = self.options.client_config.get("isolation.level") != "read_uncommitted"
        found = retrying(lambda: watermarks(self._admin, [PartitionId(*tp) for tp in tps], committed, TRY_S),
                         f"watermarks of {len(tps)} partitions", self.options.poll_timeout_ms / 1000, side="source",
                         renew=renew, abandoned=self._orphaned)
        return {(p.topic, p.partition): marks for p, marks in found.items()}

    def initialOffset(self) -> Offsets:
        tps = self._topic_partitions()
        marks = self._watermarks(tps)
        start = self.options.starting_offsets
        if start.everywhere is not None:
            return nest({tp: marks[tp][0 if start.everywhere == EARLIEST else 1] for tp in tps})
        named, every = start.topics, isinstance(self.options.subscription, Subscribe)
        missing = [f"{t}-{p}" for t, p in tps if PartitionId(t, p) not in start.given and (every or t in named)]
        if missing:
            raise SourceOptionError(f"option 'startingOffsets' must give every partition of the subscribed "
                                    f"topics; missing {missing}")
        resolved = {}
        for tp in tps:
            low, high = marks[tp]
            o = start.given.get(PartitionId(*tp), EARLIEST)  # a pattern's topic not named starts at its earliest
            resolved[tp] = low if o == EARLIEST else high if o == LATEST else o
        return nest(resolved)

    def getDefaultReadLimit(self) -> ReadLimit:
        n = self.options.max_offsets_per_trigger
        return ReadMaxRows(n) if n else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        tps = self._topic_partitions()
        self._target = {tp: high for tp, (_, high) in self._watermarks(tps).items()}

    def latestOffset(self, start: Offsets, limit: ReadLimit) -> Offsets:
        tps = self._topic_partitions()
        marks = self._watermarks(tps)
        begin = flatten(start)
        for tp in begin:
            if tp not in marks:
                data_loss(f"partition {tp[0]}-{tp[1]} was in the last offsets but is gone from the topic",
                          self.options.fail_on_data_loss)
        base: dict[TopicPartitionKey, int] = {}
        latest: dict[TopicPartitionKey, int] = {}
        for tp in tps:
            low, high = marks[tp]
            b = begin.get(tp, low)  # a partition added while running starts at its earliest offset
            if b > high:
                data_loss(f"partition {tp[0]}-{tp[1]}: offset {b} is past the log end {high} (topic re-created?)",
                          self.options.fail_on_data_loss)
                b = low
            base[tp] = b
            latest[tp] = high if self._target is None else min(high, self._target.get(tp, b))
            latest[tp] = max(latest[tp], b)
        if isinstance(limit, ReadMaxRows):
            latest = rate_limit(base, latest, limit.max_rows)
        return nest(latest)

    def reportLatestOffset(self) -> Offsets | None:
        return nest({tp: high for tp, (_, high) in self._watermarks(self._topic_partitions()).items()})

    def partitions(self, start: Offsets, end: Offsets) -> Sequence[InputPartition]:
        """A task per partition with records to read, or with maxReadTasks that many at most, each holding
        about the same records: a partition with nothing new gets no task."""
        begin, ends = flatten(start), flatten(end)
        new = self._watermarks([tp for tp in ends if tp not in begin])  # added since the last batch
        ranges = [OffsetRange(topic, p, b, e) for (topic, p), e in ends.items()
                  if e > (b := begin[(topic, p)] if (topic, p) in begin else new[(topic, p)][0])]
        tasks = self.options.max_read_tasks or len(ranges)
        return [KafkaInputPartition(group) for group in spread(ranges, [r.end - r.start for r in ranges], tasks)]

    def commit(self, end: Offsets) -> None:
        """Nothing to do: progress lives in Spark's checkpoint, never in consumer groups."""

    def stop(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    # ----- executor side: records --------------------------------------------------------------------------

    def read(self, partition: KafkaInputPartition) -> Iterator[pa.RecordBatch]:
        prepare_task([self.options.client_config])
        yield from read_ranges(self.options, partition.ranges)


def _record_fetch(consumer: Consumer, config: dict, options: KafkaSourceOptions) -> RecordFetch:
    if gate.enabled(options.kafka_native):
        log.debug("records fetched through the native path")
        return BatchFetch(consumer, str(config.get("client.id", gate.DEFAULT_CLIENT_ID)), options.records_per_batch)
    log.debug("records fetched through the plain path (consume())")
    return PlainFetch(consumer)


def read_ranges(options: KafkaSourceOptions, ranges: Sequence[OffsetRange]) -> Iterator[pa.RecordBatch]:
    """The ranges' records as Arrow batches, with a consumer of their own."""
    config = client_settings(consumer_config(options))
    consumer = Consumer(config)
    try:
        fetch = _record_fetch(consumer, config, options)
        try:
            yield from RangeRead(consumer, fetch, options, ranges)
        finally:
            fetch.close()
    finally:
        consumer.close()


def read_partition(options: KafkaSourceOptions, topic: str, partition: int, start: int,
                   end: int) -> Iterator[pa.RecordBatch]:
    """Records [start, end) of one partition as Arrow batches."""
    return read_ranges(options, [OffsetRange(topic, partition, start, end)])


class KafkaDataSource(DataSource):
    """Register with ``spark.dataSource.register(KafkaDataSource)``; read with
    ``spark.readStream.format("kcompact-kafka")``."""

    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def schema(self) -> str:
        return SCHEMA_DDL

    def streamReader(self, schema) -> KafkaStreamReader:
        return KafkaStreamReader(KafkaSourceOptions.parse(self.options))
