"""Exactly-once emission of a compaction task's partitions: one transactional producer for all of them, in
transactions that span them.

The sink is its own progress record: every sink record carries its source offset in the header
``kcompact.offset``, so the last committed record of a partition (read with read_committed,
streaming.kafka.sink.sink_progress) says how far emission got. The producer's transactional id is its task's slot's
(streaming.kafka.sink.transactional_ids): its init_transactions fences an earlier attempt of the same task before
anything is read or written, and the driver fences every other id of the job whenever one may still be
writing. Records are emitted in source-offset order per partition, and a record at or below its partition's
progress is never produced again. A record that came from the sink's cluster (streaming.kafka.headers.origin_header) is
left out, and progress moves past it all the same (SinkPartition.written_up_to says why).

A producer that is fenced, or whose epoch is no longer the coordinator's, is never made again here: a new
init_transactions would fence whoever holds the id now. The transaction is aborted where it still can be and
the task fails (EmitterFenced); the driver fences the job's ids before the next stage, which resumes from
the sink's word. Kafka keeps an open transaction across a broker restart, so an outage only delays a commit,
and the waits say why they wait.
"""

from __future__ import annotations

import functools
import logging
import time
import weakref
from dataclasses import dataclass, field
from typing import Callable, Iterable, Mapping, Sequence, TypeVar

import numpy as np
import pyarrow as pa
from confluent_kafka import KafkaException, Producer

from streaming.configuration.settings import SETTINGS
from streaming.kafka.headers import offset_header
from streaming.kafka.native import gate
from streaming.kafka.sink.batch_produce import BatchProduce
from streaming.kafka.sink.dead_letters import source_headers
from streaming.kafka.sink.held_buffers import HeldBuffers, sweep
from streaming.kafka.client_settings import client_settings
from streaming.kafka.failures import TRY_S, MetadataClient, is_fatal, retrying, timed_out
from streaming.kafka.headers.offset_header import OFFSET_HEADER
from streaming.kafka.headers.origin_header import Origins
from streaming.kafka.sink.plain_produce import PlainProduce
from streaming.kafka.sink.record_produce import Columns, RecordProduce, runs_of
from streaming.kafka.sink.record_size import (RecordLimits, added_headers_bound, batch_size, batch_size_bounds,
                                              librdkafka_size)
from streaming.cleaner.cleaner import DeadLetterFenced
from streaming.log.columns import header_pairs
from streaming.partition_id import PartitionId
from streaming.runtime.moments import Moment, reached

log = logging.getLogger(__name__)

T = TypeVar("T")

TRANSACTION_RECORDS: int = SETTINGS["emit.transaction.records"].default
TRANSACTION_MS: int = SETTINGS["emit.transaction.ms"].default
FIRST_TRANSACTION_RECORDS = 20_000  # an emitter's first transaction, before it has measured its rate
FEWEST_TRANSACTION_RECORDS = 1_000
QUEUE_FULL_WAIT_S = 0.05  # a producer queue full (a slow link): deliveries are served for this long, then again
# Delivery reports are served now and then while producing and all at once by the flush before each commit;
# a poll after every record cost about a tenth of the emission (bench/README.md). Runs of records end there.
POLL_EVERY = 1_000
TIMEOUT_S = 60.0
LIBRDKAFKA_MESSAGE_MAX_BYTES = 1_000_000  # message.max.bytes when neither the topics' limits nor the user set it
# Kafka's default max.message.bytes: what a dead-letter topic whose own limit the job could not read is held to (one
# it refuses would fail the emission's transaction, every partition of the task with it)
KAFKA_MAX_MESSAGE_BYTES = 1_048_588
NO_LIMITS = RecordLimits()  # no topic's limit known: librdkafka's own check alone, and no dead-letter topic


@dataclass(frozen=True)
class Delivered:
    """A tombstone a sink transaction committed: for the erase audit."""

    source_offset: int
    timestamp_ms: int
    sink_offset: int
    at_ms: int  # when its transaction committed


@dataclass(eq=False)  # each is itself: a key of the open transaction's partitions
class SinkPartition:
    """One partition the task emits to, and how far the sink holds its records (source offsets).

    Progress moves past the records left out as looped, though the sink holds nothing of them: a partition
    whose records all came from the sink's cluster would otherwise owe the sink forever, and every stage
    would read them again. So two offsets: ``emitted_up_to``, how far emission got (what the job trusts while
    the sink is as it left it, and notes in the log), and ``written_up_to``, the last record the sink holds
    (what the sink's own progress read finds); every record between them was looped. A sink that shows
    written_up_to (or any offset up to emitted_up_to) resumes after emitted_up_to: a record's origin never
    changes, so those records are left out again whenever they are read; one that shows less was emptied or
    truncated and is filled again from what it shows."""

    sink: PartitionId
    emitted_up_to: int  # the source offset of the last record the sink committed or left out; -1: none
    written_up_to: int | None = None  # the source offset of the last record the sink holds (None: emitted_up_to)
    committed_records: int = 0
    looped_records: int = 0  # left out since the task began
    tombstones: list[Delivered] = field(default_factory=list)  # committed since the task began
    refused: str | None = None  # why emission stopped at a record too big for the sink (and no dead-letter topic)
    # a sink offset at or below the sink's last record of the job's, and a high watermark the sink had reached
    # after it (None: not known): streaming.job.emission_note.EmissionNote
    sink_marks: tuple[int, int] | None = None

    def __post_init__(self) -> None:
        if self.written_up_to is None:
            self.written_up_to = self.emitted_up_to

    def __str__(self) -> str:
        return str(self.sink)


class EmitterFenced(DeadLetterFenced):
    """Another producer holds this task's transactional id now (a later attempt of the task), or the coordinator
    ended this one's epoch: nothing more of it can commit. The task fails; the sink's word decides what the
    next stage emits."""


def waiting(call: Callable[[], T], what: str, client: MetadataClient, topic: str | None = None,
            pause_s: float = 1.0) -> T:
    """A sink call in TRY_S tries for up to TIMEOUT_S, saying why it waits while the sink is away; ``client``
    asks for ``topic``'s metadata anew between tries (a new leader, a new coordinator)."""
    return retrying(call, what, TIMEOUT_S, side="sink", client=client, topic=topic, pause_s=pause_s)


class TaskEmitter:
    def __init__(self, bootstrap_servers: str, transactional_id: str, client_config: Mapping[str, str] | None = None,
                 transaction_records: int = TRANSACTION_RECORDS, kafka_native: bool = True,
                 transaction_ms: int = TRANSACTION_MS, *, origins: Origins, limits: RecordLimits = NO_LIMITS) -> None:
        """``origins``: the job's clusters, for each record's origin header and the records left out as looped.
        ``limits``: how big a record each topic takes; the producer is sized by them (the user's settings win), and a
        record bigger than its sink takes goes to the dead-letter topic or stops its partition (emit).
        A transaction holds up to ``transaction_records`` records, and about ``transaction_ms`` of them at
        the rate the last full one measured: each commit costs about three round trips (the last acks, EndTxn,
        and AddPartitionsToTxn before the next transaction's first records go), which across a WAN took more
        time than the records of a small transaction, while a transaction over a slow link must commit well
        within transaction.timeout.ms."""
        self.transactional_id = transactional_id
        self.origins = origins
        self.transaction_records = transaction_records
        self.transaction_s = transaction_ms / 1000
        self._budget = min(transaction_records, FIRST_TRANSACTION_RECORDS)  # the records of the next transaction
        self._began = 0.0
        self.kafka_native = kafka_native
        self.client_config = {"bootstrap.servers": bootstrap_servers, **(client_config or {})}
        self.limits = limits
        self.producer_config = {"linger.ms": 5, "transaction.timeout.ms": 60_000, **limits.producer_settings(),
                                **self.client_config,  # the user's win
                                "transactional.id": transactional_id, "enable.idempotence": True}
        self._settings = client_settings(self.producer_config)  # a client.id given by reference, resolved
        self._record_max = int(self._settings.get("message.max.bytes", LIBRDKAFKA_MESSAGE_MAX_BYTES))
        self._added = added_headers_bound(origins.source_value)
        sweep()  # producers parked by this process's earlier emitters, whose records have failed since
        self.producer = Producer(self._settings)
        self._held = HeldBuffers(self.producer)  # the batches the native path lends the producer
        self._park = weakref.finalize(self, self._held.park)  # at close, or when dropped unclosed
        self._runs: dict[PartitionId, RecordProduce] = {}
        self._in_transaction = False
        reached(Moment.INIT_TRANSACTIONS, transactional_id)
        self._guarded(lambda: waiting(lambda: self.producer.init_transactions(TRY_S),  # a timed-out init resumes
                                      f"the transaction coordinator of {transactional_id}", self.producer))

    def _runs_to(self, sink: PartitionId) -> RecordProduce:
        runs = self._runs.get(sink)
        if runs is None:
            runs = self._runs[sink] = (
                BatchProduce(self._held, str(self._settings.get("client.id", gate.DEFAULT_CLIENT_ID)), sink.topic,
                             sink.partition, self.origins)
                if gate.enabled(self.kafka_native) else PlainProduce(self.producer, sink.topic, sink.partition,
                                                                       self.origins))
            log.debug("%s: records produced through the %s path", sink,
                      "native" if isinstance(runs, BatchProduce) else "plain")
        return runs

    def _guarded(self, call: Callable[[], T]) -> T:
        """A call whose fatal failure (fenced, an epoch the coordinator ended) is EmitterFenced."""
        try:
            return call()
        except KafkaException as exc:
            if is_fatal(exc):
                raise EmitterFenced(f"{self.transactional_id}: {exc.args[0].str()}") from exc
            raise

    def emit(self, work: Sequence[tuple[SinkPartition, Iterable[pa.RecordBatch]]]) -> int:
        """Produce each partition's records (LOG_BATCH_SCHEMA batches, in offset order) above its progress, in
        transactions that span the partitions (sized as __init__ says), and return how many. Runs
        of records go to the producer in one call each (the native path's batch produce, or the plain
        path's); a tombstone goes alone, with a delivery report for the erase audit; a looped record not at
        all. A partition's progress moves when a transaction holding its records commits, and past looped
        records at once where none of its records wait in the open transaction."""
        before = sum(part.committed_records for part, _ in work)
        pending: dict[SinkPartition, tuple[int, int, int]] = {}  # in the open transaction: (last offset, last
        # offset written, records)
        sent: list[tuple[SinkPartition, int, int, int]] = []  # tombstones delivered: (partition, source, ts, sink)
        in_txn = 0
        try:
            for part, batches in work:
                runs = self._runs_to(part.sink)
                for batch in batches:
                    cols = Columns.of(batch)
                    tombstones = cols.tombstones()
                    too_big = self._too_big(part.sink.topic, cols)
                    starts, stops = runs_of(self.origins.looped_rows(batch.column("headers")))
                    i, n = int(np.searchsorted(cols.offsets, part.emitted_up_to, side="right")), len(cols.offsets)
                    while i < n:
                        k = int(np.searchsorted(stops, i, side="right"))  # the first run of looped records not behind
                        if k < starts.size and starts[k] <= i:
                            i, skipped = int(stops[k]), int(stops[k]) - i
                            _left_out(part, pending, int(cols.offsets[i - 1]), skipped)
                            continue
                        big = too_big[np.searchsorted(too_big, i):][:1]
                        dead = self._dead_letter_of(part, batch, i) if big.size and big[0] == i else None
                        if part.refused is not None:
                            break  # the partition's records stop here (part.refused says why); the others go on
                        if in_txn == 0:
                            self._guarded(self.producer.begin_transaction)
                            self._in_transaction, self._began = True, time.monotonic()
                        t = tombstones[np.searchsorted(tombstones, i):][:1]
                        if dead is not None:
                            self._produce_one(**dead)
                            went = 1
                        elif t.size and t[0] == i:
                            self._produce_tombstone(part, batch, i, sent)
                            went = 1
                        else:
                            stop = min(n, i + self._budget - in_txn, i + POLL_EVERY - in_txn % POLL_EVERY,
                                       *t.tolist(), *starts[k:k + 1].tolist(), *big.tolist())
                            self._guarded(functools.partial(runs.produce_all, cols, i, stop, QUEUE_FULL_WAIT_S))
                            went = stop - i
                            if self._held.full():  # the acknowledgements of what was lent so far, then let it go
                                self._flush(f"{self.transactional_id} ({part})")
                        if (in_txn + went) // POLL_EVERY > in_txn // POLL_EVERY:
                            self.producer.poll(0)
                        in_txn += went
                        i += went
                        last = int(cols.offsets[i - 1])
                        _, written, records = pending.get(part, (part.emitted_up_to, part.written_up_to, 0))
                        # a dead letter moves the partition's progress on, as a looped record does: the sink holds
                        # nothing of it (SinkPartition)
                        pending[part] = (last, written, records) if dead is not None else (last, last, records + went)
                        if in_txn >= self._budget:
                            self._commit(pending, sent)
                            self._measured(in_txn)
                            in_txn = 0
                    if part.refused is not None:
                        break
            if in_txn:
                self._commit(pending, sent)
        except BaseException as exc:
            if self._in_transaction:
                self._abort(exc)
            if isinstance(exc, KafkaException) and is_fatal(exc):
                raise EmitterFenced(f"{self.transactional_id}: {exc.args[0].str()}") from exc
            raise
        return sum(part.committed_records for part, _ in work) - before

    def _too_big(self, topic: str, cols: Columns) -> np.ndarray:
        """Rows (ascending) of the records that ``topic`` or the producer would refuse, with the headers the emitter
        adds: a cheap bound over the batch first, then each record over it counted exactly."""
        limit = min(self.limits.sinks.get(topic, self._record_max), self._record_max)
        rows = np.flatnonzero(batch_size_bounds(cols, self._added) > limit)
        sink = self.limits.sinks.get(topic)
        return rows[[not self._fits(*self._record(cols.batch, int(i)), sink) for i in rows]] if rows.size else rows

    def _fits(self, key: bytes | None, value: bytes | None, headers: list, limit: int | None) -> bool:
        """The producer takes the record, and so does a topic whose max.message.bytes is ``limit`` (None: not
        known)."""
        return librdkafka_size(key, value, headers) <= self._record_max and \
            (limit is None or batch_size(key, value, headers) <= limit)

    def _record(self, batch: pa.RecordBatch, i: int) -> tuple[bytes | None, bytes | None, list]:
        """Row i's key, value and headers as the sink receives them."""
        return batch.column("key")[i].as_py(), batch.column("value")[i].as_py(), self.origins.sink_headers(
            [*header_pairs(batch.column("headers")[i].as_py()),
             (OFFSET_HEADER, offset_header.encode(batch.column("offset")[i].as_py()))])

    def _dead_letter_of(self, part: SinkPartition, batch: pa.RecordBatch, i: int) -> dict | None:
        """Row i is too big for its sink: its produce() to the dead-letter topic, with the headers a dead letter
        carries (streaming.kafka.sink.dead_letters), when there is one it fits; else None, and ``part.refused`` says why
        its partition stops there."""
        key, value, headers = self._record(batch, i)
        offset, topic = batch.column("offset")[i].as_py(), part.sink.topic
        size, limit = batch_size(key, value, headers), self.limits.sinks.get(topic)
        over = f"sink topic {topic}'s max.message.bytes ({limit:,})" if limit is not None and size > limit else \
            f"the producer's message.max.bytes ({self._record_max:,})"
        dlt = self.limits.dead_letter_topic
        if dlt is not None:
            lettered = headers + source_headers(PartitionId(self.limits.sources.get(topic, topic), part.sink.partition))
            if self._fits(key, value, lettered, self.limits.dead_letter_limit or KAFKA_MAX_MESSAGE_BYTES):
                log.warning("%s: the record at source offset %d (%s bytes) is over %s: it goes to the dead-letter "
                            "topic %s", part, offset, f"{size:,}", over, dlt)
                return {"topic": dlt, "key": key, "value": value, "partition": part.sink.partition,
                        "timestamp": batch.column("timestamp")[i].as_py(), "headers": lettered}
            over += f", and too big for the dead-letter topic {dlt}"
        part.refused = (f"the record at offset {offset} ({size:,} bytes with the job's headers) is over {over}: "
                        f"emission to {part.sink} stops there (raise max.message.bytes and restart the job"
                        f"{'' if dlt else ', or give --dead-letter-topic'})")
        return None

    def _measured(self, records: int) -> None:
        """A full transaction ended: the next holds what this one's rate makes in transaction_s."""
        rate = records / max(time.monotonic() - self._began, 1e-3)
        self._budget = min(self.transaction_records, max(FEWEST_TRANSACTION_RECORDS, int(rate * self.transaction_s)))

    def _abort(self, cause: BaseException) -> None:
        """Abort the open transaction after a failure; a producer that can no longer abort (fenced, or its
        transaction timed out and the coordinator ended it) leaves that to the coordinator."""
        self._in_transaction = False
        try:
            self.producer.abort_transaction(TIMEOUT_S)
            self._held.let_go()  # the abort flushed: what was queued failed
        except KafkaException as exc:
            log.warning("%s: abort after %s failed: %s", self.transactional_id, type(cause).__name__, exc)
            if is_fatal(exc) and not isinstance(cause, EmitterFenced):
                raise EmitterFenced(f"{self.transactional_id}: {exc.args[0].str()}") from cause

    def _produce_tombstone(self, part: SinkPartition, batch: pa.RecordBatch, i: int,
                           sent: list[tuple[SinkPartition, int, int, int]]) -> None:
        """The tombstone at row i, through produce(): its delivery report gives its sink offset."""
        offset, timestamp = batch.column("offset")[i].as_py(), batch.column("timestamp")[i].as_py()
        key, _, headers = self._record(batch, i)

        def reported(err, msg) -> None:
            if err is None:
                sent.append((part, offset, timestamp, msg.offset()))
        self._produce_one(topic=part.sink.topic, value=None, key=key, partition=part.sink.partition,
                          timestamp=timestamp, headers=headers, on_delivery=reported)

    def _produce_one(self, **record) -> None:
        """One produce() of ``record``, waiting while the producer's queue is full (a slow link: deliveries are
        served, then it goes again)."""
        while True:
            try:
                self._guarded(functools.partial(self.producer.produce, **record))
                return
            except BufferError:
                self.producer.poll(QUEUE_FULL_WAIT_S)

    def _commit(self, pending: dict[SinkPartition, tuple[int, int, int]], sent: list) -> None:
        where = f"{self.transactional_id} ({', '.join(map(str, list(pending)[:3]))}{', ...' if len(pending) > 3 else ''})"
        reached(Moment.FLUSH, f"{next(iter(pending))} in {where}")
        self._flush(where)  # every delivery report first: the tombstones' sink offsets
        reached(Moment.COMMIT, where)
        self._guarded(lambda: waiting(lambda: self.producer.commit_transaction(TRY_S),  # a timed-out commit goes
                                      f"the commit of {where}", self.producer))  # on when called again
        self._in_transaction = False
        at_ms = int(time.time() * 1000)
        for part, source, ts, sink_offset in sent:
            part.tombstones.append(Delivered(source, ts, sink_offset, at_ms))
        sent.clear()
        for part, (last, written, records) in pending.items():
            part.emitted_up_to, part.written_up_to = last, written
            part.committed_records += records
        pending.clear()

    def _flush(self, where: str) -> None:
        """Wait for every record's acknowledgement (a sink below min.insync.replicas takes none: in short tries, saying
        why, not silently for the whole timeout), then let go of the batches lent."""
        def flushed() -> None:
            if left := self.producer.flush(TRY_S):
                raise timed_out(f"{left} records not yet acknowledged")
        waiting(lambda: self._guarded(flushed), f"acknowledgements of {where}", self.producer, pause_s=0)
        self._held.let_go()

    def transaction(self, records: Callable[[Producer], int]) -> int:
        """``records(producer)`` produces, in one transaction of its own, committed here; how many it produced
        (the dead letters of a pass, between the emission's transactions)."""
        self._guarded(self.producer.begin_transaction)
        self._in_transaction = True
        try:
            n = records(self.producer)
            self._flush(self.transactional_id)
            self._guarded(lambda: waiting(lambda: self.producer.commit_transaction(TRY_S),
                                          f"the commit of {self.transactional_id}", self.producer))
            self._in_transaction = False
        except BaseException as exc:
            self._abort(exc)
            raise
        return n

    def close(self) -> None:
        """Wait for what is outstanding, then let the producer go, parked with what it still reads if any."""
        try:
            self.producer.flush(TIMEOUT_S)
        finally:
            self._park()


def _left_out(part: SinkPartition, pending: dict[SinkPartition, tuple[int, int, int]], last: int, records: int) -> None:
    """Looped records through source offset ``last`` left out: the partition's progress passes them with its
    open transaction's records, or now when none wait (the sink's progress read never sees them; see
    SinkPartition)."""
    part.looped_records += records
    if part in pending:
        _, written, count = pending[part]
        pending[part] = (last, written, count)
    else:
        part.emitted_up_to = last
