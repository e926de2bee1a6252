"""The log's buffers the native path lends librdkafka, held until librdkafka is done with every record in them.

The native path (streaming.kafka.sink.batch_produce) produces without RD_KAFKA_MSG_F_COPY: a record's value is
read from the log's own batch until the record is delivered or failed and its report served, not copied into
librdkafka's queue first (bench/bench_emit.py). Nothing tells of one record being done (the path asks for no
delivery report), but a producer with no record outstanding is done with all of them: a flush that returned with
none left (before each commit, and in each abort) is where the batches are let go.

A producer its emitter is done with while records are still outstanding (fenced, a sink away) is parked with its
batches. Each emitter's start and end in the process lets go of the parked producers whose records have failed
since (message.timeout.ms, at most the transaction's timeout), never before: a batch freed under librdkafka would
be sent as whatever took its memory."""

from __future__ import annotations

import logging
import threading

from confluent_kafka import Producer

from streaming.kafka.sink.record_produce import Columns

log = logging.getLogger(__name__)

HELD_BYTES = 256 << 20  # lent at most, about: beyond it the emitter waits for its acknowledgements and lets go

_parked: set[HeldBuffers] = set()
_parked_lock = threading.RLock()  # an emitter dropped unclosed parks from the collector, which may run anywhere


class HeldBuffers:
    """The batches ``producer`` may still read records from."""

    def __init__(self, producer: Producer) -> None:
        self.producer = producer
        self.limit = HELD_BYTES
        self._held: list[Columns] = []
        self.bytes = 0

    def hold(self, cols: Columns) -> None:
        """``cols`` is about to be lent (runs of one batch come one after another): held before librdkafka has it."""
        if not self._held or self._held[-1] is not cols:
            self._held.append(cols)
            self.bytes += cols.nbytes

    def full(self) -> bool:
        """More than ``limit`` lent: time to wait for the acknowledgements and let go."""
        return self.bytes > self.limit

    def let_go(self) -> None:
        """The producer has no record outstanding: a flush returned with none left, and nothing was produced since."""
        self._held.clear()
        self.bytes = 0

    def park(self) -> None:
        """The emitter is done with the producer: what it may still read stays held, with the producer, until its
        records are done (sweep, which lets go of this one at once if it is done already)."""
        if self._held:
            with _parked_lock:
                _parked.add(self)
        sweep()

    def done(self) -> bool:
        """No record outstanding, once the reports already come are served (a log line counts as outstanding)."""
        self.producer.poll(0)
        return len(self.producer) == 0


def sweep() -> None:
    """Let go of the parked producers with no record outstanding. The reports are served outside the lock: a
    producer let go here is destroyed here too (librdkafka joins its threads), and other emitters need not wait."""
    global _parked
    with _parked_lock:
        parked, _parked = _parked, set()
    released: set[HeldBuffers] = set()
    try:
        for held in parked:
            try:
                if held.done():
                    held.let_go()
                    released.add(held)
            except Exception as exc:  # noqa: BLE001 (a delivery callback's error: the producer stays parked)
                log.warning("a parked producer's delivery report failed: %s", exc)
    finally:  # an interrupt mid-way puts back every one not let go
        with _parked_lock:
            _parked.update(parked - released)
