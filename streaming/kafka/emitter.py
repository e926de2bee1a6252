"""Exactly-once emission of cleaned records to the sink topic, one transactional producer per partition.

The sink is its own progress record: every sink record carries its source offset in the header
``kcompact.offset``, so after any crash the last committed record (read with read_committed) says how far
emission got. A restarted emitter first calls init_transactions with the partition's stable
transactional.id, which fences a zombie producer of an earlier run and aborts its open transaction; only
then does it read the sink's progress. Records are emitted in source-offset order, in transactions, and a
record at or below the progress offset is never produced again.

Kafka keeps an open transaction across a broker restart (its state is in __transaction_state), so an outage
only delays a commit. A producer that hit a fatal error (fenced, or its transaction timed out and was
aborted by the coordinator) is replaced: the new producer's init_transactions fences the old epoch and ends
whatever the broker still holds of its transaction, the progress is read again from the sink, and
TransactionInterrupted tells the caller to emit again from there, at the cost of one transaction's records.

The sink's word is checked: a transaction of this emitter still open after init_transactions is never
normal. Kafka skips a transaction's markers when the partition has no leader at that moment (a broker
restarted within its session timeout), so a committed transaction can stay open on the partition for good.
A read_committed reader stops before it, and the next commit of this transactional id ends it as
committed: emitting from that stale progress sent its records twice. See _resume_point.
"""

from __future__ import annotations

import functools
import logging
import time
from dataclasses import dataclass
from typing import Callable, Iterable, Mapping, TypeVar

import numpy as np
import pyarrow as pa
from confluent_kafka import KafkaException, Producer

from streaming.configuration.settings import SETTINGS
from streaming.kafka import native, offset_header
from streaming.kafka.batch_produce import BatchProduce
from streaming.kafka.client_settings import client_settings
from streaming.kafka.clients import PartitionReader
from streaming.kafka.failures import TRY_S, MetadataClient, is_fatal, retrying, timed_out
from streaming.kafka.offset_header import OFFSET_HEADER, source_offset
from streaming.kafka.plain_produce import PlainProduce
from streaming.kafka.record_produce import Columns, RecordProduce
from streaming.log.columns import header_pairs
from streaming.log.record import LogRecord
from streaming.runtime.moments import Moment, reached

log = logging.getLogger(__name__)

T = TypeVar("T")

TOPIC_HEADER = "kcompact.topic"          # on dead letters: where the record came from
PARTITION_HEADER = "kcompact.partition"
ABORT_HEADER = "kcompact.abort"           # on the one record of the abort that ends a transaction left open
TRANSACTION_RECORDS: int = SETTINGS["emit.transaction.records"].default
QUEUE_FULL_WAIT_S = 0.05  # a producer queue full (a slow link): deliveries are served for this long, then again
# Delivery reports are served now and then while producing and all at once by the flush before each commit;
# a poll after every record cost about a tenth of the emission (bench/README.md). Runs of records end there.
POLL_EVERY = 1_000
TIMEOUT_S = 60.0
SETTLE_S = 10.0  # how long a progress below the job's note, or a transaction left open, is read again


TRANSACTIONAL_PREFIX = "kcompact-"  # every transactional id starts so: what a prefixed ACL grants


def transactional_id(sink_topic: str, partition: int) -> str:
    """Stable per sink partition, so a restarted job fences the producer of the run it replaces."""
    return f"{TRANSACTIONAL_PREFIX}{sink_topic}-{partition}"


def sink_headers(r: LogRecord) -> list[tuple[str, bytes | None]]:
    return [(h["key"], h["value"]) for h in r["headers"]] + [(OFFSET_HEADER, offset_header.encode(r["offset"]))]


@dataclass(frozen=True)
class Delivered:
    """A tombstone a sink transaction committed: for the erase audit."""

    source_offset: int
    timestamp_ms: int
    sink_offset: int
    at_ms: int  # when its transaction committed


def _waiting(call: Callable[[], T], what: str, client: MetadataClient, topic: str, pause_s: float = 1.0) -> T:
    """A sink call in TRY_S tries for up to TIMEOUT_S, saying why it waits while the sink is away; ``client``
    asks for ``topic``'s metadata anew between tries (a new leader, a new coordinator)."""
    return retrying(call, what, TIMEOUT_S, side="sink", client=client, topic=topic, pause_s=pause_s)


def _reader_config(client_config: Mapping[str, str], topic: str, partition: int) -> dict[str, str]:
    return {**client_config, "group.id": f"kcompact-progress-{topic}-{partition}"}


def read_progress(client_config: Mapping[str, str], topic: str, partition: int) -> int:
    """The source offset of the last committed record of a sink partition, or -1: how far emission got."""
    return _committed_progress(client_config, topic, partition)[0]


def _committed_progress(client_config: Mapping[str, str], topic: str, partition: int) -> tuple[int, int]:
    """read_progress, and the partition's last stable offset, where the read stopped."""
    with PartitionReader(_reader_config(client_config, topic, partition), topic, partition) as reader:
        low, stable = _waiting(lambda: reader.watermarks(TRY_S), f"end offsets of {topic}-{partition}",
                               reader.client, topic)
        window = 64
        while stable > low:
            start = max(low, stable - window)
            found = [offset for m in reader.read(start, stable, TIMEOUT_S, "to recover progress")
                     if (offset := source_offset(m.headers())) is not None]
            if found:
                return found[-1], stable
            if start == low:
                break
            window *= 16  # only transaction markers or foreign records at the end: look further back
    return -1, stable


@dataclass(frozen=True)
class OpenTail:
    """What a sink partition holds past its last stable offset: records of a transaction not yet ended."""

    stable: int       # the last stable offset: where the open transaction begins
    high: int         # the high watermark
    last_source: int  # the highest source offset its records carry; -1 when none is this job's


def read_open_tail(client_config: Mapping[str, str], topic: str, partition: int, stable: int) -> OpenTail | None:
    """The records between the last stable offset and the high watermark, or None when there are none."""
    with PartitionReader(_reader_config(client_config, topic, partition), topic, partition, committed=False) as reader:
        high = _waiting(lambda: reader.watermarks(TRY_S), f"the high watermark of {topic}-{partition}",
                        reader.client, topic)[1]
        if high <= stable:
            return None
        offsets = [offset for m in reader.read(stable, high, TIMEOUT_S, "past the last stable offset")
                   if (offset := source_offset(m.headers())) is not None]
    return OpenTail(stable, high, max(offsets, default=-1))


class HangingTransaction(RuntimeError):
    """A transaction of this emitter is open on the sink partition and the job cannot tell how it ended."""


class TransactionInterrupted(RuntimeError):
    """A transaction was abandoned and the emitter renewed: emit again, from ``emitted_up_to``."""


class PartitionEmitter:
    def __init__(self, bootstrap_servers: str, topic: str, partition: int,
                 client_config: Mapping[str, str] | None = None,
                 source_topic: str | None = None, noted: int | None = None,
                 transaction_records: int = TRANSACTION_RECORDS, kafka_native: bool = True) -> None:
        """``noted``: how far the job's own note says the sink committed (None: no note), the check of the
        sink's word. ``kafka_native``: runs of records go through the native path where it can run."""
        self.topic = topic
        self.transaction_records = transaction_records
        self.source_topic = source_topic or topic
        self.partition = partition
        self.client_config = {"bootstrap.servers": bootstrap_servers, **(client_config or {})}
        self.producer_config = {"linger.ms": 5, "transaction.timeout.ms": 60_000, **self.client_config,  # the user's win
                                "transactional.id": transactional_id(topic, partition), "enable.idempotence": True}
        self.kafka_native = kafka_native
        self.committed_records = 0
        self.tombstones: list[Delivered] = []  # committed since the emitter was made
        self._sent: list[tuple[int, int, int]] = []  # (source offset, timestamp, sink offset): the open transaction's
        self.producer = self._new_producer()
        self.emitted_up_to = self._resume_point(noted)

    def _new_producer(self) -> Producer:
        settings = client_settings(self.producer_config)  # a client.id given by reference, resolved
        producer = Producer(settings)
        self.runs: RecordProduce = (
            BatchProduce(producer, str(settings.get("client.id", native.DEFAULT_CLIENT_ID)), self.topic, self.partition)
            if native.enabled(self.kafka_native) else PlainProduce(producer, self.topic, self.partition))
        log.debug("%s-%d: records produced through the %s path", self.topic, self.partition,
                  "native" if isinstance(self.runs, BatchProduce) else "plain")
        reached(Moment.INIT_TRANSACTIONS, f"{self.topic}-{self.partition}")
        _waiting(lambda: producer.init_transactions(TRY_S),  # a timed-out init_transactions resumes when called again
                 f"the transaction coordinator of {self.producer_config['transactional.id']}", producer, self.topic)
        return producer

    def _renew(self) -> None:
        """A new producer, and the progress read again: a commit that failed may have happened."""
        self.producer = self._new_producer()
        self.emitted_up_to = self._resume_point(self.emitted_up_to)

    def _resume_point(self, noted: int | None) -> int:
        """Where emission resumes, read after init_transactions: the sink's committed progress. A
        transaction of this job's still open then is one whose markers Kafka never wrote: it is aborted, and
        its records are emitted again (committing it instead would leave it open, and every reader of the
        partition stopped before it, until this partition's next commit). A progress below ``noted`` without
        one is read again for up to SETTLE_S, then believed: the sink was emptied or re-created."""
        name = f"{self.topic}-{self.partition}"
        deadline = time.monotonic() + SETTLE_S
        aborted_at: float | None = None
        while True:
            progress, stable = _committed_progress(self.client_config, self.topic, self.partition)
            tail = read_open_tail(self.client_config, self.topic, self.partition, stable)
            log.debug("%s: the sink committed through source offset %d, the job's note says %s, open past %d: %s",
                      name, progress, noted, stable, tail)
            if tail is not None and tail.last_source >= 0:
                if aborted_at is None:
                    self._abort_open(tail)
                    aborted_at = time.monotonic()
                elif time.monotonic() - aborted_at > SETTLE_S:  # its markers follow the abort's answer
                    raise HangingTransaction(
                        f"{name}: a transaction of this job's is open at sink offset {tail.stable} and aborting "
                        f"it did not end it; end it with: kafka-transactions.sh --bootstrap-server "
                        f"{self.client_config['bootstrap.servers']} abort --topic {self.topic} --partition "
                        f"{self.partition} --start-offset {tail.stable}")
                else:
                    time.sleep(0.2)
                continue
            if aborted_at is not None or noted is None or progress >= noted:
                return progress
            if time.monotonic() > deadline:
                log.warning("%s: the sink holds less than this job committed to it (source offsets through %d, "
                            "the sink through %d): it was emptied, re-created or truncated; emission resumes "
                            "after %d", name, noted, progress, progress)
                return progress
            time.sleep(1.0)

    def _abort_open(self, tail: OpenTail) -> None:
        """An abort of this producer's ends every transaction of its producer id still open on the partition,
        whatever epoch began it. Its one record is never read: a key, since a compacted sink refuses none."""
        log.warning("%s-%d: a transaction of this job's is open at sink offset %d (records through source offset "
                    "%d) because Kafka did not write its markers (it skips them while the partition has no leader); "
                    "it is aborted now and its records are emitted again", self.topic, self.partition,
                    tail.stable, tail.last_source)
        self.producer.begin_transaction()
        self.producer.produce(self.topic, None, b"", self.partition, headers=[(ABORT_HEADER, b"")])
        self._flush()
        _waiting(lambda: self.producer.abort_transaction(TRY_S),
                 f"the abort of the open transaction on {self.topic}-{self.partition}", self.producer, self.topic)

    def emit(self, batches: Iterable[pa.RecordBatch]) -> int:
        """Produce the records (LOG_BATCH_SCHEMA batches, in offset order) above the progress offset, in
        transactions; return how many. Runs of records go to librdkafka in one call each, straight from the
        columns (the native path's batch produce, or the plain path's); a tombstone goes alone, with a delivery report for the
        erase audit. Deliveries are served every POLL_EVERY records."""
        before = self.committed_records
        in_txn = 0
        most = self.transaction_records
        try:
            for batch in batches:
                cols = Columns.of(batch)
                tombstones = cols.tombstones()
                i, n = int(np.searchsorted(cols.offsets, self.emitted_up_to, side="right")), len(cols.offsets)
                while i < n:
                    if in_txn == 0:
                        self.producer.begin_transaction()
                        self._sent = []
                    t = tombstones[np.searchsorted(tombstones, i):][:1]
                    if t.size and t[0] == i:
                        self._produce_tombstone(batch, i)
                        went = 1
                    else:
                        stop = min(n, i + most - in_txn, i + POLL_EVERY - in_txn % POLL_EVERY, *t.tolist())
                        self.runs.produce_all(cols, i, stop, QUEUE_FULL_WAIT_S)
                        went = stop - i
                    if (in_txn + went) // POLL_EVERY > in_txn // POLL_EVERY:
                        self.producer.poll(0)
                    in_txn += went
                    i += went
                    last = int(cols.offsets[i - 1])
                    if in_txn >= most:
                        self._commit(last, in_txn)
                        in_txn = 0
            if in_txn:
                self._commit(last, in_txn)
        except BaseException as exc:
            fatal = is_fatal(exc)
            if in_txn:
                try:
                    self.producer.abort_transaction(TIMEOUT_S)
                except KafkaException as abort_exc:  # the next init_transactions aborts it anyway
                    log.warning("%s-%d: abort after failure failed: %s", self.topic, self.partition, abort_exc)
                    # a commit that timed out past transaction.timeout.ms: the coordinator aborted it and
                    # fenced this producer, which then refuses everything, its close included
                    fatal = fatal or is_fatal(abort_exc)
            if fatal:
                self._renew()
                raise TransactionInterrupted(f"{self.topic}-{self.partition}: the producer failed ({exc}); "
                                             f"emission resumes after offset {self.emitted_up_to}") from exc
            raise
        return self.committed_records - before

    def _produce_tombstone(self, batch: pa.RecordBatch, i: int) -> None:
        """The tombstone at row i, through produce(): its delivery report gives its sink offset."""
        offset, timestamp = batch.column("offset")[i].as_py(), batch.column("timestamp")[i].as_py()
        key = batch.column("key")[i].as_py()
        headers = [*header_pairs(batch.column("headers")[i].as_py()), (OFFSET_HEADER, offset_header.encode(offset))]
        reported = functools.partial(self._on_tombstone, offset, timestamp)
        while True:
            try:
                self.producer.produce(self.topic, None, key, self.partition, timestamp=timestamp, headers=headers,
                                      on_delivery=reported)
                return
            except BufferError:  # the producer's queue is full (a slow link): deliveries are served, then again
                self.producer.poll(QUEUE_FULL_WAIT_S)

    def _on_tombstone(self, source: int, timestamp: int, err, msg) -> None:
        if err is None:
            self._sent.append((source, timestamp, msg.offset()))

    def _commit(self, last_offset: int, records: int) -> None:
        reached(Moment.FLUSH, f"{self.topic}-{self.partition}")
        self._flush()  # every delivery report first: the tombstones' sink offsets
        reached(Moment.COMMIT, f"{self.topic}-{self.partition}")
        self._commit_transaction()
        at_ms = int(time.time() * 1000)
        self.tombstones.extend(Delivered(source, ts, sink, at_ms) for source, ts, sink in self._sent)
        self._sent = []
        self.emitted_up_to = last_offset
        self.committed_records += records

    def dead_letter(self, topic: str, records: Iterable[LogRecord]) -> int:
        """One committed transaction of records to the dead-letter topic, in the source's partition number
        (topic sync gives that topic as many partitions as the largest source), each naming its source
        topic, partition and offset in headers."""
        where = [(TOPIC_HEADER, self.source_topic.encode()), (PARTITION_HEADER, str(self.partition).encode())]
        n = 0
        self.producer.begin_transaction()
        try:
            for r in records:
                self.producer.produce(topic, key=r["key"], value=r["value"], timestamp=r["timestamp"],
                                      partition=self.partition, headers=sink_headers(r) + where)
                n += 1
            self._commit_transaction()
        except BaseException:
            self.producer.abort_transaction(TIMEOUT_S)
            raise
        return n

    def _flush(self) -> None:
        """Wait for every record's acknowledgement. A sink below min.insync.replicas takes none: this waits
        in short tries, saying why (retrying), not silently for the whole timeout."""
        def flushed() -> None:
            if left := self.producer.flush(TRY_S):
                raise timed_out(f"{left} records not yet acknowledged")
        _waiting(flushed, f"acknowledgements from {self.topic}-{self.partition}", self.producer, self.topic, pause_s=0)

    def _commit_transaction(self) -> None:
        _waiting(lambda: self.producer.commit_transaction(TRY_S),  # a timed-out commit goes on when called again
                 f"the commit to {self.topic}-{self.partition}", self.producer, self.topic)

    def close(self) -> None:
        self.producer.flush(TIMEOUT_S)
