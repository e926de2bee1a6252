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
"""

from __future__ import annotations

import functools
import logging
import time
from dataclasses import dataclass
from typing import Callable, Iterable, Mapping, TypeVar

import pyarrow as pa
from confluent_kafka import KafkaException, Producer

from streaming.kafka.client_settings import client_settings
from streaming.kafka.clients import PartitionReader
from streaming.kafka.failures import TRY_S, MetadataClient, is_fatal, retrying, timed_out
from streaming.log.columns import rows
from streaming.log.record import LogRecord
from streaming.runtime.moments import Moment, reached

log = logging.getLogger(__name__)

T = TypeVar("T")

OFFSET_HEADER = "kcompact.offset"
TOPIC_HEADER = "kcompact.topic"          # on dead letters: where the record came from
PARTITION_HEADER = "kcompact.partition"
TRANSACTION_RECORDS = 20_000
# Delivery reports are served now and then while producing and all at once by the flush before each commit;
# a poll after every record cost about a tenth of the emission (bench/README.md).
POLL_EVERY = 1_000
TIMEOUT_S = 60.0


TRANSACTIONAL_PREFIX = "kcompact-"  # every transactional id starts so: what a prefixed ACL grants


def transactional_id(sink_topic: str, partition: int) -> str:
    """Stable per sink partition, so a restarted job fences the producer of the run it replaces."""
    return f"{TRANSACTIONAL_PREFIX}{sink_topic}-{partition}"


def source_offset(headers: list[tuple[str, bytes | None]] | None) -> int | None:
    for key, value in reversed(headers or []):
        if key == OFFSET_HEADER and value is not None:
            return int(value.decode("ascii"))
    return None


def sink_headers(r: LogRecord) -> list[tuple[str, bytes | None]]:
    return [(h["key"], h["value"]) for h in r["headers"]] + [(OFFSET_HEADER, str(r["offset"]).encode("ascii"))]


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


def read_progress(client_config: Mapping[str, str], topic: str, partition: int) -> int:
    """The source offset of the last committed record of a sink partition, or -1: how far emission got."""
    config = {**client_config, "group.id": f"kcompact-progress-{topic}-{partition}"}
    with PartitionReader(config, topic, partition) as reader:
        low, high = _waiting(lambda: reader.watermarks(TRY_S), f"end offsets of {topic}-{partition}",
                             reader.client, topic)
        window = 64
        while high > low:
            start = max(low, high - window)
            found = [offset for m in reader.read(start, high, TIMEOUT_S, "to recover progress")
                     if (offset := source_offset(m.headers())) is not None]
            if found:
                return found[-1]
            if start == low:
                break
            window *= 16  # only transaction markers or foreign records at the end: look further back
    return -1


class TransactionInterrupted(RuntimeError):
    """A transaction was abandoned and the emitter renewed: emit again, from ``emitted_up_to``."""


class PartitionEmitter:
    def __init__(self, bootstrap_servers: str, topic: str, partition: int,
                 client_config: Mapping[str, str] | None = None,
                 source_topic: str | None = None) -> None:
        self.topic = topic
        self.source_topic = source_topic or topic
        self.partition = partition
        self.client_config = {"bootstrap.servers": bootstrap_servers, **(client_config or {})}
        self.producer_config = {**self.client_config,
                                "transactional.id": transactional_id(topic, partition),
                                "enable.idempotence": True, "linger.ms": 5, "transaction.timeout.ms": 60_000}
        self.committed_records = 0
        self.tombstones: list[Delivered] = []  # committed since the emitter was made
        self._sent: list[tuple[int, int, int]] = []  # (source offset, timestamp, sink offset): the open transaction's
        self.producer = self._new_producer()
        self.emitted_up_to = self._read_progress()

    def _new_producer(self) -> Producer:
        producer = Producer(client_settings(self.producer_config))
        reached(Moment.INIT_TRANSACTIONS, f"{self.topic}-{self.partition}")
        _waiting(lambda: producer.init_transactions(TRY_S),  # a timed-out init_transactions resumes when called again
                 f"the transaction coordinator of {self.producer_config['transactional.id']}", producer, self.topic)
        return producer

    def _renew(self) -> None:
        """A new producer, and the progress read again: a commit that failed may have happened."""
        self.producer = self._new_producer()
        self.emitted_up_to = self._read_progress()

    def _read_progress(self) -> int:
        return read_progress(self.client_config, self.topic, self.partition)

    def emit(self, batches: Iterable[pa.RecordBatch]) -> int:
        """Produce the records (LOG_BATCH_SCHEMA batches, in offset order) above the progress offset, in
        transactions; return how many. Read by column, not as a dict per record: the per-record work here is
        what sets emission's pace beside the producer's own."""
        before = self.committed_records
        in_txn = 0
        produce, topic, partition = self.producer.produce, self.topic, self.partition
        try:
            for batch in batches:
                for offset, timestamp, key, value, headers in rows(batch):
                    if offset <= self.emitted_up_to:
                        continue
                    if in_txn == 0:
                        self.producer.begin_transaction()
                        self._sent = []
                    headers = [*headers, (OFFSET_HEADER, b"%d" % offset)]
                    if value is None and key is not None:  # a tombstone: its sink offset goes to the erase audit
                        produce(topic, None, key, partition, timestamp=timestamp, headers=headers,
                                on_delivery=functools.partial(self._on_tombstone, offset, timestamp))
                    else:
                        produce(topic, value, key, partition, timestamp=timestamp, headers=headers)
                    in_txn += 1
                    if in_txn % POLL_EVERY == 0:
                        self.producer.poll(0)
                    last = offset
                    if in_txn >= TRANSACTION_RECORDS:
                        self._commit(last, in_txn)
                        in_txn = 0
            if in_txn:
                self._commit(last, in_txn)
        except BaseException as exc:
            if in_txn:
                try:
                    self.producer.abort_transaction(TIMEOUT_S)
                except KafkaException as abort_exc:  # the next init_transactions aborts it anyway
                    log.warning("%s-%d: abort after failure failed: %s", self.topic, self.partition, abort_exc)
            if is_fatal(exc):
                self._renew()
                raise TransactionInterrupted(f"{self.topic}-{self.partition}: the producer failed ({exc}); "
                                             f"emission resumes after offset {self.emitted_up_to}") from exc
            raise
        return self.committed_records - before

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
