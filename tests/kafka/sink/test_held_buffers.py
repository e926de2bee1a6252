"""The native path copies no value: the batch a record went from is held until its producer has no record
outstanding, and a producer let go with records outstanding stays parked, with the batches it reads, until they
fail. Values past librdkafka's own copy threshold (64 KiB: it sends larger ones straight from the batch) are
used, and each test on a broker checks what the sink holds."""

from __future__ import annotations

import gc
import time
import uuid
import weakref
from typing import Iterator

import pytest
from confluent_kafka import Producer

from streaming.brokers.local.server import free_port
from streaming.kafka.clients import read_committed
from streaming.kafka.native.gate import DEFAULT_CLIENT_ID
from streaming.kafka.sink import held_buffers
from streaming.kafka.sink.batch_produce import BatchProduce
from streaming.kafka.sink.held_buffers import HeldBuffers
from streaming.kafka.sink.record_produce import Columns
from streaming.kafka.sink.task_emitter import SinkPartition, TaskEmitter
from streaming.log import batch_from_records, make_record
from streaming.partition_id import PartitionId
from tests.kafka_helpers import ORIGINS

VALUE = 100_000  # bytes: above librdkafka's msg_copy_max_size, so its requests point into the batch


@pytest.fixture(autouse=True)
def no_parked_left() -> Iterator[None]:
    """Each test starts and ends with no producer parked in this process."""
    held_buffers.sweep()
    assert not held_buffers._parked
    yield
    for held in list(held_buffers._parked):
        held.producer.purge()
        held.producer.flush(10)
    held_buffers.sweep()
    assert not held_buffers._parked


def _cols(first: int, count: int) -> Columns:
    return Columns.of(batch_from_records([make_record(o, b"k%d" % o, bytes([o % 251]) * VALUE, 1_700_000_000_000 + o,
                                                      []) for o in range(first, first + count)]))


def _values(bootstrap_servers: str, topic: str) -> list[bytes]:
    return [r.value for r in read_committed(bootstrap_servers, topic, 1)]


@pytest.mark.integration
def test_a_batch_is_held_until_its_producer_has_no_record_outstanding(bootstrap_servers, new_topic) -> None:
    topic = new_topic()
    producer = Producer({"bootstrap.servers": bootstrap_servers, "transactional.id": uuid.uuid4().hex})
    producer.init_transactions(30)
    held = HeldBuffers(producer)
    produce = BatchProduce(held, DEFAULT_CLIENT_ID, topic, 0, ORIGINS)
    producer.begin_transaction()
    cols = _cols(0, 8)
    lent = weakref.ref(cols)
    produce.produce_all(cols, 0, 4, serve=0.05)
    produce.produce_all(cols, 4, 8, serve=0.05)
    assert held.bytes == cols.nbytes, "a batch's runs are held once"
    del cols
    gc.collect()
    assert len(producer) > 0, "no report is served until a poll or a flush"
    assert lent() is not None, "librdkafka may still read the batch: it is held"
    assert producer.flush(30) == 0
    held.park()
    gc.collect()
    assert lent() is None and held.bytes == 0 and held not in held_buffers._parked, "nothing outstanding: let go"
    producer.commit_transaction(30)
    assert _values(bootstrap_servers, topic) == [bytes([o % 251]) * VALUE for o in range(8)]


@pytest.mark.integration
def test_a_producer_let_go_with_records_outstanding_is_parked_with_its_batches_until_they_fail() -> None:
    producer = Producer({"bootstrap.servers": f"127.0.0.1:{free_port()}", "message.timeout.ms": 5_000,
                         "log_level": 0})
    held = HeldBuffers(producer)
    cols = _cols(0, 3)
    lent = weakref.ref(cols)
    BatchProduce(held, DEFAULT_CLIENT_ID, "nowhere", 0, ORIGINS).produce_all(cols, 0, 3, serve=0.05)
    del cols, producer
    held.park()
    gc.collect()
    assert held in held_buffers._parked and lent() is not None, "nothing listens: the records are outstanding"
    deadline = time.monotonic() + 60
    while held in held_buffers._parked and time.monotonic() < deadline:
        held_buffers.sweep()
        time.sleep(0.1)
    gc.collect()
    assert held not in held_buffers._parked and lent() is None, "the records failed: the batches are let go"


@pytest.mark.integration
def test_the_emitter_waits_for_acknowledgements_when_more_than_its_limit_is_lent(bootstrap_servers, new_topic,
                                                                                monkeypatch) -> None:
    topic = new_topic()
    emitter = TaskEmitter(bootstrap_servers, f"kcompact-test-{uuid.uuid4().hex[:8]}-0", origins=ORIGINS)
    emitter._held.limit = 3 * VALUE
    most = 0
    hold = emitter._held.hold

    def counted(cols: Columns) -> None:
        nonlocal most
        hold(cols)
        most = max(most, emitter._held.bytes)
    monkeypatch.setattr(emitter._held, "hold", counted)
    part = SinkPartition(PartitionId(topic, 0), -1)
    assert emitter.emit([(part, [_cols(first, 2).batch for first in range(0, 12, 2)])]) == 12
    assert isinstance(emitter._runs[part.sink], BatchProduce), "the native path lends its batches"
    emitter.close()
    batch = _cols(0, 2).nbytes
    assert emitter._held.limit < most <= emitter._held.limit + batch, "let go once past the limit, before the next"
    assert emitter._held.bytes == 0 and emitter._held not in held_buffers._parked
    assert part.emitted_up_to == 11
    assert _values(bootstrap_servers, topic) == [bytes([o % 251]) * VALUE for o in range(12)]


@pytest.mark.integration
def test_an_emitter_dropped_unclosed_keeps_the_batches_its_producer_may_still_read(bootstrap_servers,
                                                                                  new_topic) -> None:
    """A task torn down mid-emission, its emitter never closed, while something else still holds the producer (a
    traceback's frame): the batches outlive the emitter until the producer is done with them."""
    topic = new_topic()
    emitter = TaskEmitter(bootstrap_servers, f"kcompact-test-{uuid.uuid4().hex[:8]}-0", origins=ORIGINS)
    producer = emitter.producer
    cols = _cols(0, 3)
    lent = weakref.ref(cols)
    producer.begin_transaction()
    emitter._runs_to(PartitionId(topic, 0)).produce_all(cols, 0, 3, serve=0.05)
    del cols, emitter
    gc.collect()
    assert lent() is not None or len(producer) == 0, "a batch let go while its records were outstanding"
    producer.abort_transaction(30)
    held_buffers.sweep()
    gc.collect()
    assert lent() is None, "the abort failed what was queued: let go"
