"""The task emitter on the real broker: one transactional producer for a task's partitions, in transactions that
span them; the sink is its own progress record, so emission is exactly-once across restarts, whatever else the
sink partition holds; the same id fences an earlier producer, which then commits nothing more."""

from __future__ import annotations

import logging
import time
import uuid

import pyarrow as pa
import pytest
from confluent_kafka import KafkaException

from streaming.brokers.local.server import free_port
from streaming.kafka.sink import task_emitter as emitter_module
from streaming.kafka.client_settings import SPARSE_CONNECTIONS
from streaming.kafka.clients import RecordProducer, TopicRecord, read_committed
from streaming.kafka.sink.dead_letters import sink_headers
from streaming.kafka.headers.offset_header import OFFSET_HEADER, source_offset
from streaming.kafka.headers.origin_header import ORIGIN_HEADER
from streaming.kafka.sink.record_size import RecordLimits
from streaming.kafka.sink.sink_progress import committed_progress
from streaming.kafka.sink.task_emitter import (FEWEST_TRANSACTION_RECORDS, FIRST_TRANSACTION_RECORDS, EmitterFenced,
                                               SinkPartition, TaskEmitter)
from streaming.log import batch_from_records, make_record
from streaming.partition_id import PartitionId
from streaming.runtime.moments import Moment
from tests.e2e.helpers import read_topic
from tests.kafka_helpers import ORIGINS

pytestmark = pytest.mark.integration


def _records(offsets, value: bytes = b"v") -> list[dict]:
    return [make_record(o, b"k%d" % o, value + b"%d" % o, 1_700_000_000_000 + o, [("h", b"x")]) for o in offsets]


def _batches(offsets, value: bytes = b"v") -> list[pa.RecordBatch]:
    """The records as the log hands them to the emitter."""
    return [batch_from_records(_records(offsets, value))]


def _tid() -> str:
    return f"kcompact-test-{uuid.uuid4().hex[:8]}-0"


def _progress(bootstrap: str, sink: str, partition: int = 0) -> int:
    return committed_progress({"bootstrap.servers": bootstrap}, [PartitionId(sink, partition)])[PartitionId(sink, partition)]


def _commits(monkeypatch) -> list[str]:
    """Where each commit of the emitters made from now on was: the named moment every commit passes."""
    commits: list[str] = []
    monkeypatch.setattr(emitter_module, "reached",
                        lambda moment, where: commits.append(where) if moment is Moment.COMMIT else None)
    return commits


def test_one_transaction_spans_the_tasks_partitions_each_record_with_its_source_offset(bootstrap_servers, new_topic,
                                                                                      monkeypatch) -> None:
    sink = new_topic(partitions=2)
    commits = _commits(monkeypatch)
    emitter = TaskEmitter(bootstrap_servers, _tid(), origins=ORIGINS)
    one, two = SinkPartition(PartitionId(sink, 0), -1), SinkPartition(PartitionId(sink, 1), 4)
    assert emitter.emit([(one, _batches([3, 5, 9])), (two, _batches([2, 4, 6, 8]))]) == 5
    emitter.close()
    assert len(commits) == 1, "the two partitions' records in one transaction"
    assert (one.emitted_up_to, one.committed_records, two.emitted_up_to, two.committed_records) == (9, 3, 8, 2)
    got = read_committed(bootstrap_servers, sink, 2)
    assert [(r.key, r.value, list(r.headers)) for r in got] == [
        (b"k%d" % o, b"v%d" % o, [("h", b"x"), (OFFSET_HEADER, b"%d" % o), (ORIGIN_HEADER, ORIGINS.source_value)])
        for o in (3, 5, 9, 6, 8)]


def test_a_restarted_emitter_resumes_after_the_last_committed_record(bootstrap_servers, new_topic) -> None:
    sink, tid = new_topic(), _tid()
    first = TaskEmitter(bootstrap_servers, tid, origins=ORIGINS)
    first.emit([(SinkPartition(PartitionId(sink, 0), -1), _batches(range(0, 10)))])
    first.close()
    again = TaskEmitter(bootstrap_servers, tid, origins=ORIGINS)
    part = SinkPartition(PartitionId(sink, 0), _progress(bootstrap_servers, sink))
    assert part.emitted_up_to == 9
    assert again.emit([(part, _batches(range(0, 15)))]) == 5, "offsets up to the progress are never produced again"
    again.close()
    assert [source_offset(r.headers) for r in read_committed(bootstrap_servers, sink, 1)] == list(range(15))


def test_the_same_id_ends_an_earlier_producers_open_transaction(bootstrap_servers, new_topic) -> None:
    """A zombie attempt of a task: its open transaction is aborted by the new attempt's init_transactions."""
    sink, tid = new_topic(), _tid()
    dead = TaskEmitter(bootstrap_servers, tid, origins=ORIGINS)
    dead.emit([(SinkPartition(PartitionId(sink, 0), -1), _batches(range(3)))])
    dead.producer.begin_transaction()  # it stops with records 3 and 4 in an open transaction
    for r in _records([3, 4]):
        dead.producer.produce(sink, key=r["key"], value=r["value"], partition=0, headers=sink_headers(r, ORIGINS))
    dead.producer.flush(30)
    successor = TaskEmitter(bootstrap_servers, tid, origins=ORIGINS)  # same transactional.id: fences and aborts it
    part = SinkPartition(PartitionId(sink, 0), _progress(bootstrap_servers, sink))
    assert part.emitted_up_to == 2
    successor.emit([(part, _batches(range(6)))])
    successor.close()
    assert [source_offset(r.headers) for r in read_committed(bootstrap_servers, sink, 1)] == list(range(6))


def test_a_fenced_emitter_fails_as_fenced_and_commits_nothing(bootstrap_servers, new_topic) -> None:
    """The zombie goes on after the new attempt took its id: the broker refuses its epoch, and the emission
    fails as EmitterFenced (the task then fails; nothing re-initialises the producer)."""
    sink, tid = new_topic(), _tid()
    zombie = TaskEmitter(bootstrap_servers, tid, origins=ORIGINS)
    TaskEmitter(bootstrap_servers, tid, origins=ORIGINS).close()
    part = SinkPartition(PartitionId(sink, 0), -1)
    with pytest.raises(EmitterFenced, match=tid):
        zombie.emit([(part, _batches(range(5)))])
    assert part.emitted_up_to == -1 and read_committed(bootstrap_servers, sink, 1) == []


def _from(offsets, origin: bytes) -> list[dict]:
    return [make_record(o, b"k%d" % o, b"v%d" % o, 1_700_000_000_000 + o, [(ORIGIN_HEADER, origin)]) for o in offsets]


@pytest.mark.parametrize("kafka_native", [True, False], ids=["native", "plain"])
def test_records_from_the_sinks_cluster_are_left_out_and_progress_passes_them(bootstrap_servers, new_topic,
                                                                             kafka_native) -> None:
    """Looped records are not produced, wherever they fall in a batch; a partition passes them with the open
    transaction's records, or at once when it has none there (one whose records all looped writes nothing)."""
    sink, sink_id = new_topic(partitions=2), ORIGINS.sink.encode()
    mixed = sorted(_records([0, 1, 4]) + _from([2, 3, 6], sink_id) + _from([5], b"cluster-c") + _from([7, 8], sink_id),
                   key=lambda r: r["offset"])
    emitter = TaskEmitter(bootstrap_servers, _tid(), kafka_native=kafka_native, origins=ORIGINS)
    one, two = SinkPartition(PartitionId(sink, 0), -1), SinkPartition(PartitionId(sink, 1), -1)
    assert emitter.emit([(one, [batch_from_records(mixed)]), (two, [batch_from_records(_from(range(5), sink_id))])]) == 4
    emitter.close()
    assert (one.emitted_up_to, one.written_up_to, one.committed_records, one.looped_records) == (8, 5, 4, 5)
    assert (two.emitted_up_to, two.written_up_to, two.committed_records, two.looped_records) == (4, -1, 0, 5)
    got = read_committed(bootstrap_servers, sink, 2)
    assert [(source_offset(r.headers), ORIGINS.origin_of(r.headers)) for r in got] == \
        [(0, b"test-source-cluster"), (1, b"test-source-cluster"), (4, b"test-source-cluster"), (5, b"cluster-c")]
    assert [len([h for h in r.headers if h[0] == ORIGIN_HEADER]) for r in got] == [1] * 4, "an origin kept, not added"


def test_progress_is_found_behind_records_that_are_not_the_compactors(bootstrap_servers, new_topic) -> None:
    sink = new_topic(partitions=2)
    emitter = TaskEmitter(bootstrap_servers, _tid(), origins=ORIGINS)
    emitter.emit([(SinkPartition(PartitionId(sink, 0), -1), _batches(range(20))),
                  (SinkPartition(PartitionId(sink, 1), -1), _batches(range(7)))])
    emitter.close()
    foreign = RecordProducer(bootstrap_servers)
    for i in range(200):  # more than the first look-back window of the progress reader
        foreign.send(sink, TopicRecord(b"other", b"%d" % i), partition=0)
    foreign.flush()
    assert committed_progress({"bootstrap.servers": bootstrap_servers},
                              [PartitionId(sink, 0), PartitionId(sink, 1)]) == \
        {PartitionId(sink, 0): 19, PartitionId(sink, 1): 6}, "one reader for both partitions"


def test_an_emitter_without_a_transaction_coordinator_says_it_waits_and_gives_up_at_its_timeout(
        caplog, monkeypatch) -> None:
    monkeypatch.setattr(emitter_module, "TIMEOUT_S", 3.0)
    monkeypatch.setattr(emitter_module, "TRY_S", 1.0)
    caplog.set_level(logging.WARNING, logger="streaming.kafka.failures")
    began = time.monotonic()
    with pytest.raises(KafkaException, match=r"code=_(TIMED_OUT|TRANSPORT),"):
        TaskEmitter(f"127.0.0.1:{free_port()}", "kcompact-nowhere-0", origins=ORIGINS)  # nothing listens there
    assert time.monotonic() - began < 10, "its own timeout, not librdkafka's"
    waits = [r.getMessage() for r in caplog.records]
    assert waits and waits[0].startswith("waiting for the sink cluster: the transaction coordinator of "
                                         "kcompact-nowhere-0"), waits


def test_the_emitter_keeps_the_users_connection_linger_and_transaction_timeout(bootstrap_servers, new_topic) -> None:
    sink = new_topic()
    users = {SPARSE_CONNECTIONS: "true", "linger.ms": "50", "transaction.timeout.ms": "90000"}
    given = TaskEmitter(bootstrap_servers, _tid(), users, origins=ORIGINS)
    assert {k: given.producer_config[k] for k in users} == users
    assert given.emit([(SinkPartition(PartitionId(sink, 0), -1), _batches([1]))]) == 1, "and it emits either way"


def test_transactions_hold_the_records_set_and_a_full_producer_queue_waits_for_room(bootstrap_servers, new_topic,
                                                                                      monkeypatch) -> None:
    """emit.transaction.records, counted over the partitions; a queue smaller than a transaction (a slow link)
    is served, not an error."""
    sink = new_topic(partitions=2)
    commits = _commits(monkeypatch)
    emitter = TaskEmitter(bootstrap_servers, _tid(), {"queue.buffering.max.messages": "50"}, transaction_records=400,
                          origins=ORIGINS)
    parts = [SinkPartition(PartitionId(sink, p), -1) for p in (0, 1)]
    assert emitter.emit([(parts[0], _batches(range(700))), (parts[1], _batches(range(500)))]) == 1200
    assert len(commits) == 3 and [p.emitted_up_to for p in parts] == [699, 499]
    emitter.close()
    got = read_committed(bootstrap_servers, sink, 2)
    assert [source_offset(r.headers) for r in got] == [*range(700), *range(500)]


@pytest.mark.parametrize("transaction_ms, commits_made", [(1, 1 + 5), (600_000, 1 + 1)])
def test_a_transaction_holds_what_the_last_full_one_made_in_emit_transaction_ms(
        bootstrap_servers, new_topic, monkeypatch, transaction_ms: int, commits_made: int) -> None:
    """The first transaction holds FIRST_TRANSACTION_RECORDS; the next ones what its rate makes in
    transaction_ms: a millisecond's is below FEWEST_TRANSACTION_RECORDS (1,000 a commit), ten minutes' is
    above what is left (one commit)."""
    sink = new_topic()
    commits = _commits(monkeypatch)
    emitter = TaskEmitter(bootstrap_servers, _tid(), transaction_ms=transaction_ms, origins=ORIGINS)
    part = SinkPartition(PartitionId(sink, 0), -1)
    total = FIRST_TRANSACTION_RECORDS + 5 * FEWEST_TRANSACTION_RECORDS
    assert emitter.emit([(part, _batches(range(total)))]) == total
    emitter.close()
    assert len(commits) == commits_made and part.emitted_up_to == total - 1


def test_records_the_sink_refuses_fail_the_emission_and_commit_nothing(bootstrap_servers, new_topic) -> None:
    """A sink partition that does not exist: the records go nowhere, and the transaction is aborted rather than
    committing what it has."""
    sink = new_topic()
    emitter = TaskEmitter(bootstrap_servers, _tid(), {"message.timeout.ms": "3000"}, origins=ORIGINS)
    part = SinkPartition(PartitionId(sink, 7), -1)
    with pytest.raises(KafkaException, match=r"UNKNOWN_(TOPIC|PARTITION)|_MSG_TIMED_OUT|failed delivery"):
        emitter.emit([(part, _batches(range(3)))])
    assert part.emitted_up_to == -1 and read_committed(bootstrap_servers, sink, 1) == []


def test_a_tombstone_names_its_origin_as_every_record_does_and_a_looped_one_is_left_out(bootstrap_servers,
                                                                                         new_topic) -> None:
    """Tombstones go alone (their delivery reports feed the erase audit): the origin rule holds for them too."""
    sink, sink_id = new_topic(partitions=1), ORIGINS.sink.encode()
    tombstones = [make_record(0, b"a", None, 1_700_000_000_000, []),
                  make_record(1, b"b", None, 1_700_000_000_001, [(ORIGIN_HEADER, b"cluster-c")]),
                  make_record(2, b"c", None, 1_700_000_000_002, [(ORIGIN_HEADER, sink_id)])]
    emitter = TaskEmitter(bootstrap_servers, _tid(), origins=ORIGINS)
    part = SinkPartition(PartitionId(sink, 0), -1)
    emitter.emit([(part, [batch_from_records(tombstones)])])
    emitter.close()
    got = read_committed(bootstrap_servers, sink, 1)
    assert [(r.key, r.value, ORIGINS.origin_of(r.headers)) for r in got] == \
        [(b"a", None, ORIGINS.source_value), (b"b", None, b"cluster-c")]
    assert [len([h for h in r.headers if h[0] == ORIGIN_HEADER]) for r in got] == [1, 1], "written, not assumed"
    assert part.emitted_up_to == 2


SMALL_SINK = 3000  # the sink topics' max.message.bytes in the tests below: a 5 kB value is too big for them


def _big(offset: int) -> dict:
    return make_record(offset, b"k%d" % offset, b"B" * 5000, 1_700_000_000_000 + offset, [("h", b"x")])


@pytest.mark.parametrize("kafka_native", [True, False], ids=["native", "plain"])
def test_a_record_too_big_for_its_sink_stops_only_its_partition_and_the_tasks_others_commit(
        bootstrap_servers, new_topic, kafka_native) -> None:
    """Before it, its partition's records commit; after it, none; the task's other partition commits all of its
    own, in the same transactions. A run of small records is sized for the small topic too (batch.size)."""
    sink = new_topic(partitions=2, config={"max.message.bytes": str(SMALL_SINK)})
    emitter = TaskEmitter(bootstrap_servers, _tid(), kafka_native=kafka_native, origins=ORIGINS,
                          limits=RecordLimits({sink: SMALL_SINK}))
    stopped, flowing = SinkPartition(PartitionId(sink, 0), -1), SinkPartition(PartitionId(sink, 1), -1)
    held = sorted(_records([0, 1, 3, 4]) + [_big(2)], key=lambda r: r["offset"])
    assert emitter.emit([(stopped, [batch_from_records(held)]), (flowing, _batches(range(200), b"v" * 100))]) == 202
    emitter.close()
    assert (stopped.emitted_up_to, stopped.committed_records) == (1, 2)
    assert stopped.refused is not None and "offset 2 (5," in stopped.refused and f"{sink}-0" in stopped.refused
    assert f"sink topic {sink}'s max.message.bytes (3,000)" in stopped.refused, stopped.refused
    assert (flowing.emitted_up_to, flowing.refused) == (199, None)
    got = read_topic(bootstrap_servers, sink, 2)
    assert {p: [r["source_offset"] for r in rs] for p, rs in got.items()} == {0: [0, 1], 1: list(range(200))}


def test_a_record_too_big_for_its_sink_goes_to_the_dead_letter_topic_and_its_partition_goes_on(
        bootstrap_servers, new_topic) -> None:
    """In the emission's transaction, with the headers a keyless dead letter carries and its key; progress passes
    it as it passes a looped record: the sink's last record stays the one before it."""
    sink, dlt = new_topic(partitions=2, config={"max.message.bytes": str(SMALL_SINK)}), new_topic(partitions=2)
    emitter = TaskEmitter(bootstrap_servers, _tid(), origins=ORIGINS,
                          limits=RecordLimits({sink: SMALL_SINK}, dlt, 1_048_588, {sink: "orders"}))
    part = SinkPartition(PartitionId(sink, 1), -1)
    assert emitter.emit([(part, [batch_from_records(sorted(_records([0, 2]) + [_big(1), _big(3)],
                                                           key=lambda r: r["offset"]))])]) == 2
    emitter.close()
    assert (part.emitted_up_to, part.written_up_to, part.committed_records, part.refused) == (3, 2, 2, None)
    assert [source_offset(r.headers) for r in read_committed(bootstrap_servers, sink, 2)] == [0, 2]
    letters = read_topic(bootstrap_servers, dlt, 2)
    assert letters[0] == []
    assert [(r["key"], r["value"], r["headers"]) for r in letters[1]] == [
        (b"k%d" % o, b"B" * 5000, [("h", b"x"), (OFFSET_HEADER, b"%d" % o), (ORIGIN_HEADER, ORIGINS.source_value),
                                   ("kcompact.topic", b"orders"), ("kcompact.partition", b"1")]) for o in (1, 3)]


def test_a_record_too_big_for_the_dead_letter_topic_too_stops_its_partition(bootstrap_servers, new_topic) -> None:
    sink, dlt = (new_topic(config={"max.message.bytes": str(SMALL_SINK)}) for _ in range(2))
    emitter = TaskEmitter(bootstrap_servers, _tid(), origins=ORIGINS,
                          limits=RecordLimits({sink: SMALL_SINK}, dlt, SMALL_SINK))
    part = SinkPartition(PartitionId(sink, 0), -1)
    assert emitter.emit([(part, [batch_from_records(_records([0]) + [_big(1)])])]) == 1
    emitter.close()
    assert part.emitted_up_to == 0 and f"too big for the dead-letter topic {dlt}" in part.refused
    assert read_committed(bootstrap_servers, dlt, 1) == []
