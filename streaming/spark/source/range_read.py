"""One task's read: the offset ranges of many partitions with one consumer, all assigned at once.

A consumer holds one fetch in flight per broker, and a broker holds a fetch that finds nothing new for
fetch.wait.max.ms: reading partitions one after another would wait that long at every switch. Assigned
together, one fetch carries every partition's records, so a task over hundreds of small ranges costs a few
round trips, and a range is left as soon as its end is read (paused, its buffered records dropped). Aborted
transactions are skipped by the read_committed consumer and control markers never appear, so a range ends
on position, not count.
"""

from __future__ import annotations

import logging
import time
from typing import Iterator, NamedTuple, Sequence

import pyarrow as pa
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from streaming.kafka.source.fetched import FetchError, RecordFetch
from streaming.kafka.failures import SAY_EVERY_S, TRY_S, UNUSED_GROUP_REFUSED, refresh_metadata, retrying
from streaming.runtime.moments import Moment, reached
from streaming.spark.source.columns import Columns
from streaming.spark.source.options import KafkaSourceOptions

log = logging.getLogger(__name__)

Key = tuple[str, int]
# ListOffsets' "earliest" and "latest": offsets_for_times with them gives log starts and ends, one request per leader
EARLIEST_TIMESTAMP, LATEST_TIMESTAMP = -2, -1
# A position the leader no longer holds: with auto.offset.reset=error, librdkafka reports it as its own
# _AUTO_OFFSET_RESET ("Offset out of range"), not as the broker's OFFSET_OUT_OF_RANGE.
OUT_OF_RANGE = frozenset({KafkaError.OFFSET_OUT_OF_RANGE, KafkaError._AUTO_OFFSET_RESET})  # noqa: SLF001 (librdkafka names its own codes so)


class OffsetRange(NamedTuple):
    topic: str
    partition: int
    start: int
    end: int


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


class RangeRead:
    """``fetch`` reads the records of ``consumer``'s partitions, once assigned (the native path's batch fetch, or
    the plain path's consume())."""

    def __init__(self, consumer: Consumer, fetch: RecordFetch, options: KafkaSourceOptions,
                 ranges: Sequence[OffsetRange]) -> None:
        self.consumer, self.fetch, self.options = consumer, fetch, options
        self.ranges = {(r.topic, r.partition): r for r in ranges}
        self.position: dict[Key, int] = {}
        self.columns: dict[Key, Columns] = {}
        topics = {r.topic for r in ranges}
        self.topic = next(iter(topics)) if len(topics) == 1 else None  # whose metadata a wait refreshes

    def log_starts(self, keys: Sequence[Key]) -> dict[Key, int]:
        return self._list_offsets(keys, EARLIEST_TIMESTAMP, "log start")

    def _list_offsets(self, keys: Sequence[Key], timestamp: int, what: str) -> dict[Key, int]:
        def ask() -> dict[Key, int]:
            found = self.consumer.offsets_for_times([TopicPartition(t, p, timestamp) for t, p in keys], timeout=TRY_S)
            for tp in found:
                if tp.error is not None:
                    raise KafkaException(tp.error)
                if tp.offset < 0:  # a leader moving answers with no offset: the retry asks the new one
                    raise KafkaException(KafkaError(KafkaError.OFFSET_NOT_AVAILABLE, f"no {what} for "
                                                    f"{tp.topic}-{tp.partition}", retriable=True))
            return {(tp.topic, tp.partition): tp.offset for tp in found}

        where = f"{keys[0][0]}-{keys[0][1]}" if len(keys) == 1 else f"{len(keys)} partitions"
        return retrying(ask, f"{what} of {where}", self.options.poll_timeout_ms / 1000, side="source",
                        client=self.consumer, topic=self.topic)

    def __iter__(self) -> Iterator[pa.RecordBatch]:
        for t, p in self.ranges:
            reached(Moment.LOG_START, f"{t}-{p}")
        lows = self.log_starts(list(self.ranges))
        for key, r in self.ranges.items():
            start = r.start
            if start < lows[key]:
                data_loss(f"partition {r.topic}-{r.partition}: offsets [{start}, {min(lows[key], r.end)}) were "
                          f"deleted (log start is now {lows[key]})", self.options.fail_on_data_loss)
                start = lows[key]
            if start < r.end:
                self.position[key] = start
                self.columns[key] = Columns(*key)
        if not self.position:
            return
        self._assign()
        yield from self._read()

    def _assign(self) -> None:
        for t, p in self.position:
            self.fetch.forward(t, p)
        self.consumer.assign([TopicPartition(t, p, o) for (t, p), o in self.position.items()])

    def _finish(self, key: Key) -> Iterator[pa.RecordBatch]:
        """The range is read: its last records go, and its partition is fetched no more."""
        del self.position[key]
        yield from self.columns.pop(key).take()
        if self.position:
            self.consumer.pause([TopicPartition(*key)])

    def _read(self) -> Iterator[pa.RecordBatch]:
        options = self.options
        idle_since = said = refreshed = time.monotonic()
        fetching: set[Key] = set()
        while self.position:
            # no more than the ranges hold: a fetch waits for as many records as it asks for, up to its timeout,
            # and the last records of a read would wait out the whole second
            left = sum(self.ranges[key].end - at for key, at in self.position.items())
            fetched = self.fetch.fetch(min(options.records_per_batch, left), timeout_s=1.0)
            moved = False
            for event in fetched.events if fetched is not None else ():
                key = (event.topic, event.partition)
                if isinstance(event, FetchError):
                    yield from self._failed(key, event.error)
                    continue
                if key not in self.position:  # fetched before its range ended
                    continue
                before = self.position[key]
                self.position[key] = after = self.columns[key].add(fetched, event, before, self.ranges[key].end)
                moved |= after > before
                if key not in fetching:
                    fetching.add(key)
                    reached(Moment.FETCH, f"{key[0]}-{key[1]} at offset {before}")
                if after >= self.ranges[key].end:
                    yield from self._finish(key)
            if fetched is not None and len(fetched):  # errors alone are no progress: they end at pollTimeoutMs
                idle_since = time.monotonic()
            elif not moved:
                for tp in self.consumer.position([TopicPartition(*key) for key in self.position]):
                    if tp.offset >= self.ranges[(tp.topic, tp.partition)].end:  # only markers were left
                        yield from self._finish((tp.topic, tp.partition))
                if not self.position:
                    break
                now, limit_s = time.monotonic(), options.poll_timeout_ms / 1000
                (t, p), position = next(iter(self.position.items()))
                if now - idle_since > limit_s:
                    raise TimeoutError(f"partition {t}-{p}: no progress from offset {position} towards "
                                       f"{self.ranges[(t, p)].end} within kafkaConsumer.pollTimeoutMs="
                                       f"{options.poll_timeout_ms}")
                # a leader away: librdkafka fetches again once one is elected and its metadata names it, which
                # a refresh now and then brings sooner; meanwhile say so now and then
                if now - refreshed >= TRY_S:
                    refresh_metadata(self.consumer, self.topic)
                    refreshed = time.monotonic()
                if min(now - idle_since, now - said) >= SAY_EVERY_S:
                    log.warning("waiting for the source cluster: partition %s-%d gave no records from offset %d "
                                "for %.0fs; waiting for up to %.0fs more", t, p, position, now - idle_since,
                                limit_s - (now - idle_since))
                    said = now
            if sum(map(len, self.columns.values())) >= options.records_per_batch:
                for cols in self.columns.values():
                    yield from cols.take()

    def _failed(self, key: Key, err: KafkaError) -> Iterator[pa.RecordBatch]:
        """An error in place of records: out of range is data loss, as in Spark's own source: below the log start
        the read goes on from there, past the log end (the topic deleted and re-created) the rest of the range
        is skipped; or, with failOnDataLoss, the task fails. Anything else fails the task, and the job reads the
        batch again."""
        if err.code() == UNUSED_GROUP_REFUSED:
            log.debug("partition %s-%d: %s (this consumer uses no group)", *key, err)
            return
        if err.code() not in OUT_OF_RANGE or key not in self.position:
            raise KafkaException(err)
        position, end = self.position[key], self.ranges[key].end
        log_end = self._list_offsets([key], LATEST_TIMESTAMP, "log end")[key]
        if position > log_end:
            data_loss(f"partition {key[0]}-{key[1]}: offset {position} is past the log end {log_end} (the topic "
                      f"deleted and re-created?): offsets [{position}, {end}) are gone", self.options.fail_on_data_loss)
            yield from self._finish(key)
            return
        data_loss(f"partition {key[0]}-{key[1]}: offset {position} is out of range", self.options.fail_on_data_loss)
        self.position[key] = max(position, self.log_starts([key])[key])
        if self.position[key] >= end:
            yield from self._finish(key)
        else:
            self.fetch.restart(*key, self.position[key])
