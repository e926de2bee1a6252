"""The emitter on the real broker: the sink is its own progress record, so emission is exactly-once
across restarts, whatever else the sink partition holds."""

from __future__ import annotations

import logging
import re
import time

import pyarrow as pa
import pytest
from confluent_kafka import KafkaException

from streaming.brokers.local.server import free_port
from streaming.kafka import emitter as emitter_module
from streaming.kafka.clients import RecordProducer, TopicRecord, read_committed
from streaming.kafka.client_settings import SPARSE_CONNECTIONS
from streaming.kafka.admin import create_topic, unique_topic_name
from streaming.kafka.emitter import PartitionEmitter, read_progress, sink_headers
from streaming.kafka.offset_header import OFFSET_HEADER, source_offset
from streaming.log import batch_from_records, make_record

pytestmark = pytest.mark.integration

LOST_MARKER_TRIES = 6


def _records(offsets, value: bytes = b"v") -> list[dict]:
    return [make_record(o, b"k%d" % o, value + b"%d" % o, 1_700_000_000_000 + o, [("h", b"x")]) for o in offsets]


def _batches(offsets, value: bytes = b"v") -> list[pa.RecordBatch]:
    """The records as the log hands them to the emitter."""
    return [batch_from_records(_records(offsets, value))]


def test_emitted_records_carry_their_source_offset_and_keep_key_value_headers(bootstrap_servers, new_topic) -> None:
    sink = new_topic(partitions=2)
    emitter = PartitionEmitter(bootstrap_servers, sink, 1)
    assert emitter.emitted_up_to == -1, "an empty sink: nothing emitted yet"
    assert emitter.emit(_batches([3, 5, 9])) == 3 and emitter.emitted_up_to == 9
    emitter.close()
    got = read_committed(bootstrap_servers, sink, 2)
    assert [(r.key, r.value, list(r.headers)) for r in got] == [
        (b"k%d" % o, b"v%d" % o, [("h", b"x"), (OFFSET_HEADER, b"%d" % o)]) for o in (3, 5, 9)]


def test_a_restarted_emitter_resumes_after_the_last_committed_record(bootstrap_servers, new_topic) -> None:
    sink = new_topic()
    first = PartitionEmitter(bootstrap_servers, sink, 0)
    first.emit(_batches(range(0, 10)))
    first.close()
    again = PartitionEmitter(bootstrap_servers, sink, 0)
    assert again.emitted_up_to == 9
    assert again.emit(_batches(range(0, 15))) == 5, "offsets up to the progress are never produced again"
    again.close()
    assert [source_offset(r.headers) for r in read_committed(bootstrap_servers, sink, 1)] == list(range(15))


def test_an_open_transaction_of_a_dead_emitter_is_aborted_and_not_counted(bootstrap_servers, new_topic) -> None:
    sink = new_topic()
    dead = PartitionEmitter(bootstrap_servers, sink, 0)
    dead.emit(_batches(range(3)))
    dead.producer.begin_transaction()  # it dies with records 3 and 4 in an open transaction
    for r in _records([3, 4]):
        dead.producer.produce(sink, key=r["key"], value=r["value"], partition=0, headers=sink_headers(r))
    dead.producer.flush(30)
    successor = PartitionEmitter(bootstrap_servers, sink, 0)  # same transactional.id: fences and aborts it
    assert successor.emitted_up_to == 2
    successor.emit(_batches(range(6)))
    successor.close()
    assert [source_offset(r.headers) for r in read_committed(bootstrap_servers, sink, 1)] == list(range(6))


def test_progress_is_found_behind_records_that_are_not_the_compactors(bootstrap_servers, new_topic) -> None:
    sink = new_topic()
    emitter = PartitionEmitter(bootstrap_servers, sink, 0)
    emitter.emit(_batches(range(20)))
    emitter.close()
    foreign = RecordProducer(bootstrap_servers)
    for i in range(200):  # more than the first look-back window of the progress reader
        foreign.send(sink, TopicRecord(b"other", b"%d" % i), partition=0)
    foreign.flush()
    assert PartitionEmitter(bootstrap_servers, sink, 0).emitted_up_to == 19


def test_an_emitter_without_a_transaction_coordinator_says_it_waits_and_gives_up_at_its_timeout(
        caplog, monkeypatch) -> None:
    monkeypatch.setattr(emitter_module, "TIMEOUT_S", 3.0)
    monkeypatch.setattr(emitter_module, "TRY_S", 1.0)
    caplog.set_level(logging.WARNING, logger="streaming.kafka.failures")
    began = time.monotonic()
    with pytest.raises(KafkaException, match=r"code=_(TIMED_OUT|TRANSPORT),"):
        PartitionEmitter(f"127.0.0.1:{free_port()}", "sink", 0)  # nothing listens there
    assert time.monotonic() - began < 10, "its own timeout, not librdkafka's"
    waits = [r.getMessage() for r in caplog.records]
    assert waits and waits[0].startswith("waiting for the sink cluster: the transaction coordinator of kcompact-sink-0"), \
        waits


def test_the_emitter_keeps_the_users_connection_linger_and_transaction_timeout(bootstrap_servers, new_topic) -> None:
    sink = new_topic()
    users = {SPARSE_CONNECTIONS: "true", "linger.ms": "50", "transaction.timeout.ms": "90000"}
    given = PartitionEmitter(bootstrap_servers, sink, 0, users)
    assert {k: given.producer_config[k] for k in users} == users
    assert given.emit(_batches([1])) == 1, "and it emits as well either way"


def test_transactions_hold_the_records_set_and_a_full_producer_queue_waits_for_room(bootstrap_servers,
                                                                                      new_topic) -> None:
    """emit.transaction.records; a queue smaller than a transaction (a slow link) is served, not an error."""
    sink = new_topic()
    emitter = PartitionEmitter(bootstrap_servers, sink, 0, {"queue.buffering.max.messages": "50"},
                               transaction_records=400)
    commits = []
    emitter._commit_transaction = lambda original=emitter._commit_transaction: (commits.append(1), original())
    assert emitter.emit(_batches(range(1000))) == 1000 and len(commits) == 3
    emitter.close()
    assert [source_offset(r.headers) for r in read_committed(bootstrap_servers, sink, 1)] == list(range(1000))


def test_a_committed_transaction_whose_markers_a_crash_lost_is_not_emitted_twice(crashing_broker, caplog) -> None:
    """The duplicate of issue 51, made on purpose. The broker is killed the moment a commit returns, before
    it wrote the transaction's markers, and is back within its session timeout. Its coordinator then finds
    the data partition without a leader and skips the markers (KAFKA-5202), so the transaction stays open on
    the partition for good. A read_committed reader stops before it. An emitter that took that for the
    sink's progress emitted the transaction's records again, and its commit ended the open transaction as
    committed: every record twice. Now the open transaction is aborted first."""
    bs = crashing_broker.bootstrap_servers
    sink = create_topic(bs, unique_topic_name("lost-markers"), 1)
    committed = -1
    for tries in range(1, LOST_MARKER_TRIES + 1):  # the kill must beat the markers: under load it can lose the race
        emitter = PartitionEmitter(bs, sink, 0, noted=committed)
        assert emitter.emitted_up_to == committed, "an earlier round's markers were written: nothing is open"
        emitter.emit(_batches(range(committed + 1, committed + 2001)))
        committed += 2000
        crashing_broker.crash()
        crashing_broker.up()
        if read_progress({"bootstrap.servers": bs}, sink, 0) < committed:
            print(f"the markers were lost in crash {tries}")
            break
    else:
        pytest.fail(f"the markers were written before the kill in all {LOST_MARKER_TRIES} rounds")
    caplog.set_level(logging.WARNING, logger=emitter_module.__name__)
    resumed = PartitionEmitter(bs, sink, 0, noted=committed)
    assert resumed.emitted_up_to == committed - 2000, "the open transaction aborted, its records to emit again"
    assert re.search(rf"{sink}-0: a transaction of this job's is open at sink offset \d+ \(records through source "
                     rf"offset {committed}\)", caplog.text) and "the sink holds less" not in caplog.text
    resumed.emit(_batches(range(committed + 1001)))
    offsets = [source_offset(list(r.headers)) for r in read_committed(bs, sink, 1)]
    assert offsets == list(range(committed + 1001)), f"{len(offsets)} records, {len(set(offsets))} source offsets"


def test_a_sink_that_holds_less_than_the_job_committed_is_read_again_then_trusted(bootstrap_servers, new_topic,
                                                                                  caplog, monkeypatch) -> None:
    """A note beyond the sink's progress and no open transaction: the sink was emptied or re-created while
    the job was down. It is read again for a while (markers on their way), said at WARNING, then believed."""
    monkeypatch.setattr(emitter_module, "SETTLE_S", 1.0)
    sink = new_topic(partitions=1)
    PartitionEmitter(bootstrap_servers, sink, 0).emit(_batches(range(10)))
    caplog.set_level(logging.WARNING, logger=emitter_module.__name__)
    assert PartitionEmitter(bootstrap_servers, sink, 0, noted=99).emitted_up_to == 9
    assert "the sink holds less than this job committed to it (source offsets through 99, the sink through 9)" \
        in caplog.text
