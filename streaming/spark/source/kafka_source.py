"""A Spark Structured Streaming source for Kafka on the Python Data Source API and confluent-kafka.

Spark's JVM Kafka connector cannot be installed here, so this source speaks its language instead: the
same columns (key, value, topic, partition, offset, timestamp, timestampType, headers) and options
(kafka.bootstrap.servers, subscribe, startingOffsets, maxOffsetsPerTrigger, failOnDataLoss, kafka.*).
Offsets live in Spark's checkpoint; each topic-partition is one input partition, read on an executor by a
consumer created there (the reader object is pickled, so it never holds a client) and returned as Arrow
record batches, Spark's fast path for Python sources.
"""

from __future__ import annotations

import bisect
import itertools
import logging
import operator
import time
import uuid
from typing import Iterator, Sequence

import numpy as np
import pyarrow as pa
from confluent_kafka import Consumer, KafkaError, KafkaException, Message, TopicPartition
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (ReadAllAvailable, ReadLimit, ReadMaxRows,
                                              SupportsTriggerAvailableNow)

from streaming.kafka.client_settings import client_settings
from streaming.kafka.failures import (SAY_EVERY_S, TRY_S, UNUSED_GROUP_REFUSED, refresh_metadata,
                                      retrying)
from streaming.configuration.subscription import EARLIEST, LATEST, Subscribe, SubscribePattern
from streaming.runtime.moments import Moment, reached
from streaming.partition_id import PartitionId
from streaming.runtime.logging_setup import configure_worker
from streaming.spark.source.offsets import Offsets, flatten, nest, rate_limit
from streaming.spark.source.options import KafkaSourceOptions, SourceOptionError
from streaming.table.kafka_columns import HEADERS_TYPE, no_headers
from streaming.job.task import prepare_task

log = logging.getLogger(__name__)

SOURCE_NAME = "kcompact-kafka"
SCHEMA_DDL = ("key binary, value binary, topic string, partition int, offset long, timestamp timestamp, "
              "timestampType int, headers array<struct<key:string,value:binary>>")
ARROW_SCHEMA = pa.schema([("key", pa.binary()), ("value", pa.binary()), ("topic", pa.string()),
                          ("partition", pa.int32()), ("offset", pa.int64()),
                          ("timestamp", pa.timestamp("us", tz="UTC")), ("timestampType", pa.int32()),
                          ("headers", HEADERS_TYPE)])
# confluent-kafka's timestamp types (0 none, 1 create, 2 log append) -> Kafka's TimestampType ids, which
# Spark's timestampType column holds
_TIMESTAMP_TYPE_IDS = np.array([-1, 0, 1], dtype=np.int32)
# librdkafka stops fetching a partition whose queue of fetched records is full and, by default, waits a whole
# second (fetch.queue.backoff.ms=1000) before it fetches again, however soon the queue drains: a reader that
# keeps up spent most of its time in that wait (bench/README.md). A kafka.* option given by the user wins.
FETCH_QUEUE_BACKOFF_MS = "10"
# A read asks for a whole partition range at once, so fetches of 8 MiB a partition instead of librdkafka's 1 MiB:
# an eighth of the fetch requests for the broker and the client to handle (bench/README.md). A kafka.* option wins.
MAX_PARTITION_FETCH_BYTES = str(8 << 20)

TopicPartitionKey = tuple[str, int]


class DataLossError(RuntimeError):
    """Offsets the query needs are gone from Kafka (retention, topic re-creation)."""


def data_loss(message: str, fail: bool) -> None:
    text = (f"{message}. Some data may have been lost because they are not available in Kafka any more; "
            f"either the data was aged out by Kafka or the topic may have been deleted before all the data "
            f"in the topic was processed. If you want your streaming query to go on in such cases, set the "
            f"source option 'failOnDataLoss' to 'false'.")
    if fail:
        raise DataLossError(text)
    log.warning("%s (failOnDataLoss=false: going on)", text)


class KafkaInputPartition(InputPartition):
    def __init__(self, topic: str, partition: int, start: int, end: int) -> None:
        super().__init__((topic, partition, start, end))
        self.topic, self.partition, self.start, self.end = topic, partition, start, end


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

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["_client"] = None  # clients never travel to executors
        return state

    # ----- driver side: offsets ----------------------------------------------------------------------------

    def _metadata(self) -> Consumer:
        if self._client is None:  # first call in the process Spark runs the source's driver side in
            configure_worker([self.options.client_config])
            self._client = _consumer(self.options)
        return self._client

    def _retrying(self, call, what: str, topic: str | None = None):
        """Driver-side metadata calls ride out a broker that is away for up to kafkaConsumer.pollTimeoutMs,
        asking for ``topic``'s metadata anew between tries."""
        return retrying(call, what, self.options.poll_timeout_ms / 1000, side="source",
                        client=self._metadata() if topic else None, topic=topic)

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
        c = self._metadata()
        return {tp: self._retrying(lambda tp=tp: c.get_watermark_offsets(TopicPartition(*tp), cached=False,
                                                                         timeout=TRY_S),
                                   f"watermarks of {tp[0]}-{tp[1]}", tp[0])
                for tp in tps}

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
        begin = flatten(start)
        out = []
        for (topic, p), e in flatten(end).items():
            b = begin.get((topic, p))
            if b is None:
                b = self._watermarks([(topic, p)])[(topic, p)][0]
            if e > b:
                out.append(KafkaInputPartition(topic, p, b, e))
        return out

    def commit(self, end: Offsets) -> None:
        """Nothing to do: progress lives in Spark's checkpoint, never in consumer groups."""

    def stop(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    # ----- executor side: records --------------------------------------------------------------------------

    def read(self, partition: KafkaInputPartition) -> Iterator[pa.RecordBatch]:
        prepare_task([self.options.client_config])
        yield from read_partition(self.options, partition.topic, partition.partition, partition.start, partition.end)


def read_partition(options: KafkaSourceOptions, topic: str, partition: int, start: int,
                   end: int) -> Iterator[pa.RecordBatch]:
    """Records [start, end) of one partition as Arrow batches; aborted transactions are skipped by the
    read_committed consumer and control markers never appear, so the loop ends on position, not count."""
    consumer = _consumer(options)

    def log_start() -> int:
        return retrying(lambda: consumer.get_watermark_offsets(TopicPartition(topic, partition), cached=False,
                                                               timeout=TRY_S)[0],
                        f"log start of {topic}-{partition}", options.poll_timeout_ms / 1000, side="source",
                        client=consumer, topic=topic)
    try:
        reached(Moment.LOG_START, f"{topic}-{partition}")
        low = log_start()
        if start < low:
            data_loss(f"partition {topic}-{partition}: offsets [{start}, {min(low, end)}) were deleted "
                      f"(log start is now {low})", options.fail_on_data_loss)
            start = low
        if start >= end:
            return
        tp = TopicPartition(topic, partition, start)
        consumer.assign([tp])
        cols = _Columns(topic, partition)
        position = start
        idle_since = said = refreshed = time.monotonic()
        fetching = False
        while position < end:
            msgs = consumer.consume(min(end - position, options.records_per_batch), timeout=1.0)
            errors = _error_indexes(msgs)
            i = 0
            while i < len(msgs) and position < end:
                j = next((k for k in errors if k >= i), len(msgs))
                if j > i:
                    position = cols.add(msgs[i:j], position, end)
                if j == len(msgs):
                    break
                err = msgs[j].error()
                i = j + 1
                if err.code() == UNUSED_GROUP_REFUSED:
                    log.debug("partition %s-%d: %s (this consumer uses no group)", topic, partition, err)
                    continue
                if err.code() != KafkaError.OFFSET_OUT_OF_RANGE:  # a broker away too: the job reads the batch again
                    raise KafkaException(err)
                data_loss(f"partition {topic}-{partition}: offset {position} is out of range",
                          options.fail_on_data_loss)
                position = max(position, log_start())
                consumer.assign([TopicPartition(topic, partition, position)])
                break
            if not msgs:
                current = consumer.position([TopicPartition(topic, partition)])[0].offset
                if current >= end:
                    break
                now, limit_s = time.monotonic(), options.poll_timeout_ms / 1000
                if now - idle_since > limit_s:
                    raise TimeoutError(f"partition {topic}-{partition}: no progress from offset {position} "
                                       f"towards {end} within kafkaConsumer.pollTimeoutMs="
                                       f"{options.poll_timeout_ms}")
                # a leader away: librdkafka fetches again once one is elected and its metadata names it, which
                # a refresh now and then brings sooner; meanwhile say so now and then
                if now - refreshed >= TRY_S:
                    refresh_metadata(consumer, topic)
                    refreshed = time.monotonic()
                if min(now - idle_since, now - said) >= SAY_EVERY_S:
                    log.warning("waiting for the source cluster: partition %s-%d gave no records from offset %d "
                                "for %.0fs; waiting for up to %.0fs more", topic, partition, position,
                                now - idle_since, limit_s - (now - idle_since))
                    said = now
            else:
                idle_since = time.monotonic()
                if not fetching and position < end:
                    fetching = True
                    reached(Moment.FETCH, f"{topic}-{partition} at offset {position}")
            if len(cols) >= options.records_per_batch:
                yield cols.take()
        if len(cols):
            yield cols.take()
    finally:
        consumer.close()


def _error_indexes(msgs: list[Message]) -> list[int]:
    """Where the consume() result holds errors instead of records: almost always nowhere, which one pass
    in C finds (the per-message work of this loop is the source's CPU, bench/README.md)."""
    errors = list(map(Message.error, msgs))
    # not errors.count(None): comparing a KafkaError with None raises inside list.count (a SystemError)
    if not any(map(operator.is_not, errors, itertools.repeat(None))):
        return []
    return [k for k, e in enumerate(errors) if e is not None]


class _Columns:
    """Column buffers for one partition's records, filled a consume() result at a time and turned into an
    Arrow batch in one go: per message, only Message's own accessors run, mapped in C."""

    def __init__(self, topic: str, partition: int) -> None:
        self.topic, self.partition = topic, partition
        self._reset()

    def _reset(self) -> None:
        self.keys: list = []
        self.values: list = []
        self.offsets: list = []
        self.timestamps: list = []
        self.headers: list = []

    def __len__(self) -> int:
        return len(self.offsets)

    def add(self, msgs: list, position: int, end: int) -> int:
        """Take the messages (none with an error) from ``position`` up to ``end``; returns the new read position.
        Messages below the position are ones taken already, delivered again after a broker came back: the log
        would hold them twice, and a key's two copies at one offset would both be its winner."""
        offsets = list(map(Message.offset, msgs))
        if offsets and offsets[0] < position:
            first = bisect.bisect_left(offsets, position)
            msgs, offsets = msgs[first:], offsets[first:]
        stop = bisect.bisect_left(offsets, end)
        if stop < len(msgs):  # a message at or past the end: the range is read
            msgs, offsets = msgs[:stop], offsets[:stop]
            position = end
        elif offsets:
            position = offsets[-1] + 1
        self.offsets += offsets
        self.keys += map(Message.key, msgs)
        self.values += map(Message.value, msgs)
        self.timestamps += map(Message.timestamp, msgs)
        self.headers += map(Message.headers, msgs)
        return position

    def take(self) -> pa.RecordBatch:
        n = len(self.offsets)
        # the (type, ms) pairs flattened in one pass, faster than np.array over the tuples (bench/README.md)
        stamps = np.fromiter(itertools.chain.from_iterable(self.timestamps), dtype=np.int64, count=2 * n).reshape(n, 2)
        kinds, millis = stamps[:, 0], stamps[:, 1]
        types = _TIMESTAMP_TYPE_IDS[kinds]
        headers = no_headers(n) if not any(self.headers) else pa.array([h or [] for h in self.headers], HEADERS_TYPE)
        batch = pa.RecordBatch.from_arrays([
            pa.array(self.keys, pa.binary()), pa.array(self.values, pa.binary()),
            pa.repeat(pa.scalar(self.topic, pa.string()), n), pa.array(np.full(n, self.partition, dtype=np.int32)),
            pa.array(self.offsets, pa.int64()),
            pa.array(millis * 1000).cast(ARROW_SCHEMA.field("timestamp").type),
            pa.array(types), headers], schema=ARROW_SCHEMA)
        self._reset()
        return batch


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
