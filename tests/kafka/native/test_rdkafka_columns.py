"""The C extension's entry points refuse what they cannot use before they touch memory, each with an exception
naming the argument: records outside the buffers, offsets that run backwards or past their data, buffers not
aligned for int64, validity of the wrong length, a closed client, a library not bound; and a fetcher refuses
close() while a fetch of it waits in librdkafka on another thread. No broker is needed: every check comes
before anything is sent."""

from __future__ import annotations

import subprocess
import sys
import threading
import time

import numpy as np
import pytest
from confluent_kafka import Consumer, Producer

from streaming.kafka.native import gate
from streaming.kafka.headers.offset_header import OFFSET_HEADER
from streaming.kafka.headers.origin_header import ORIGIN_HEADER
from streaming.kafka.sink.record_produce import Columns
from streaming.log import batch_from_records, make_record

NOWHERE = "127.0.0.1:9"
QUIET = {"bootstrap.servers": NOWHERE, "log_level": 0}  # nothing listens there: librdkafka need not say so


@pytest.fixture
def producer():
    client = Producer(QUIET)
    yield client
    client.purge()
    client.flush(0)


@pytest.fixture
def consumer():
    client = Consumer({**QUIET, "group.id": "g"})
    yield client
    client.close()


def _cols() -> Columns:
    return Columns.of(batch_from_records([make_record(10 + i, b"k%d" % i, b"v" * i, 1_000 + i, [("h", b"x")])
                                          for i in range(4)]))


def _args(producer, cols: Columns, **changed) -> list:
    """produce_rows' arguments for records [0, 4) of ``cols``, some of them changed."""
    args = dict(producer=producer, topic="t", partition=0, offset_header=OFFSET_HEADER, origin_header=ORIGIN_HEADER,
                origin=b"cluster-a", offsets=cols.offsets,
                timestamps=cols.timestamps, key_valid=cols.key_valid, key_offsets=cols.key_offsets, keys=cols.keys,
                value_valid=cols.value_valid, value_offsets=cols.value_offsets, values=cols.values,
                header_offsets=cols.header_offsets, headers=cols.headers, start=0, stop=4)
    args.update(changed)
    return list(args.values())


def test_consistent_columns_are_taken(producer) -> None:
    cols = _cols()  # librdkafka reads the values from it until they are purged
    assert gate.columns().produce_rows(*_args(producer, cols)) == (4, 0)
    producer.purge()
    producer.flush(0)


@pytest.mark.parametrize("changed, refusal", [
    (dict(start=-1), r"records \[-1, 4\) are not within the 4 given"),
    (dict(stop=5), r"records \[0, 5\) are not within the 4 given"),
    (dict(start=3, stop=2), r"records \[3, 2\) are not within"),
    (dict(partition=-1), "partition must be >= 0"),
    (dict(offset_header=""), "the offset header has no name"),
    (dict(origin_header=""), "the origin header needs a name of its own"),
    (dict(origin_header=OFFSET_HEADER), "the origin header needs a name of its own"),
    (dict(timestamps=np.zeros(3, np.int64)), "timestamps holds 3 items for 4 records"),
    (dict(key_offsets=np.array([0, 2, 1, 3, 4], np.int64)), r"key offsets\[2\] = 1 is not within \[2, "),
    (dict(value_offsets=np.array([0, 0, 1, 3, 1000], np.int64)), r"value offsets\[4\] = 1000 is not within \[3, 6\]"),
    (dict(header_offsets=np.array([-1, 0, 1, 2, 3], np.int64)), r"header offsets\[0\] = -1 is not within"),
    (dict(key_offsets=np.array([0, 2, 4, 6], np.int64)), "key offsets holds 4 offsets for 4 records, not 5"),
    (dict(offsets=memoryview(np.zeros(5, np.int64).tobytes())[1:33]), "offsets must be aligned int64 items"),
    (dict(offsets=np.zeros(3, np.int32)), "offsets must be aligned int64 items"),
    (dict(key_valid=np.ones(3, bool)), "key valid holds 3 bytes for 4 records"),
    (dict(value_valid=np.ones(5, bool)), "value valid holds 5 bytes for 4 records"),
])
def test_produce_rows_refuses_arguments_that_do_not_fit_naming_them(producer, changed, refusal) -> None:
    with pytest.raises(ValueError, match=refusal):
        gate.columns().produce_rows(*_args(producer, _cols(), **changed))


def test_a_closed_client_is_refused_not_read(producer) -> None:
    closed = Producer(QUIET)
    closed.close()
    with pytest.raises(RuntimeError, match="the producer is closed"):
        gate.columns().produce_rows(*_args(closed, _cols()))
    with pytest.raises(RuntimeError, match="the client is closed"):
        gate.columns().fatal_error(closed)
    assert gate.columns().handle_name(closed, gate.PRODUCER) is None


def test_calls_before_the_library_is_bound_are_refused() -> None:
    """In a process of its own, since the session's extension is bound once and for good."""
    script = ("from confluent_kafka import Producer, Consumer\n"
              "from streaming.kafka.native import _rdkafka_columns as c\n"
              "p = Producer({'bootstrap.servers': '127.0.0.1:9'})\n"
              "for call in (lambda: c.fatal_error(p), lambda: c.handle_name(p, 0),\n"
              "             lambda: c.Fetcher(Consumer({'group.id': 'g'}), 8)):\n"
              "    try:\n"
              "        call()\n"
              "    except RuntimeError as exc:\n"
              "        print(exc)\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["bind() librdkafka first"] * 3


def test_a_fetcher_made_again_and_one_whose_consumer_closed_first(consumer) -> None:
    fetcher = gate.columns().Fetcher(consumer, 8)
    fetcher.__init__(consumer, 16)  # the first queue and message array go first (the sanitizer lane sees leaks)
    assert fetcher.fetch(1, 0, 100) is None
    with pytest.raises(ValueError, match="max_records must be at least 1"):
        fetcher.fetch(0, 0, 100)
    with pytest.raises(ValueError, match="timeout_ms must be >= 0"):
        fetcher.fetch(1, -1, 100)
    with pytest.raises(ValueError, match="max_bytes must be within"):
        fetcher.fetch(1, 0, 1 << 31)
    other = Consumer({**QUIET, "group.id": "g"})
    orphan = gate.columns().Fetcher(other, 8)
    other.close()
    with pytest.raises(RuntimeError, match="the consumer was closed before its fetcher"):
        orphan.fetch(1, 0, 100)
    orphan.close()  # the queue went with the handle: nothing is freed twice
    with pytest.raises(RuntimeError, match="the fetcher is closed"):
        orphan.fetch(1, 0, 100)


def test_close_while_a_fetch_waits_in_another_thread_is_refused(consumer) -> None:
    fetcher = gate.columns().Fetcher(consumer, 8)
    waiting = threading.Thread(target=fetcher.fetch, args=(1, 5_000, 100))
    waiting.start()
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:  # until the other thread's fetch is seen waiting in librdkafka
        try:
            fetcher.fetch(1, 0, 100)
        except RuntimeError as exc:
            assert str(exc) == "a fetch of this fetcher is running in another thread"
            break
    with pytest.raises(RuntimeError, match="close\\(\\) while a fetch of this fetcher runs in another thread"):
        fetcher.close()
    waiting.join()
    fetcher.close()
    with pytest.raises(RuntimeError, match="the fetcher is closed"):
        fetcher.fetch(1, 0, 100)
