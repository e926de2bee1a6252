"""The emitter against the emit limits: a bare confluent-kafka transactional producer writing the same records
with the same headers, and librdkafka's own rate in C, side by side in one run on the same broker.

    python bench/bench_emit.py [--records 1000000 --value-bytes 100 --headers 0 [--distinct-headers] --rounds 2
                                [--transaction-records 20000,100000]]

One partition log holds the records (one per key, as a fully compacted log emits them). The bare side has
them in memory as Python lists already (reading them is not timed) and produces each with its
``kcompact.offset`` header in transactions of the emitter's size, flushing and committing each. With several
--transaction-records, every side runs at each size (emit.transaction.records), side by side. The librdkafka
side hands each transaction's records to rd_kafka_producev in one C loop (streaming.kafka.sink.batch_produce), its
log read included: what the producer costs without a Python call per record. The emitter
side is TaskEmitter.emit fed from the log, as the compaction stage feeds it (reading and decoding the
log's objects included); the log's read alone is timed too, so the emitter's own share shows. Each side
writes into a topic made just before it; rounds alternate which side goes first. Each side's CPU-seconds in
this process (its Python and librdkafka's threads, not the broker's) are printed beside its time.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import tempfile
import time

from confluent_kafka import Producer

from streaming.brokers.choice import acquire_broker
from streaming.kafka.admin import create_topic, unique_topic_name
from streaming.kafka.headers import offset_header
from streaming.kafka.sink.batch_produce import BatchProduce
from streaming.kafka.sink.held_buffers import HeldBuffers
from streaming.kafka.client_log import with_client_log
from streaming.kafka.sink.task_emitter import TRANSACTION_RECORDS, SinkPartition, TaskEmitter
from streaming.kafka.native.gate import DEFAULT_CLIENT_ID
from streaming.kafka.headers.offset_header import OFFSET_HEADER
from streaming.kafka.headers.origin_header import Origins
from streaming.kafka.sink.record_produce import Columns
from streaming.log import LogConfig, PartitionLog, batch_from_records, make_record
from streaming.partition_id import PartitionId

ORIGINS = Origins("bench-source", "bench-sink")  # every record gets the origin header, none is left out
PRODUCE_CPU_S: list[float] = []  # the librdkafka side's thread CPU in its produce calls, a transaction each


def fill_log(directory: str, records: int, value_bytes: int, headers: int, distinct: bool) -> PartitionLog:
    """``distinct``: the first header differs from record to record (a trace id), the others repeat."""
    log = PartitionLog(directory, LogConfig(fsync=False), jitter_seed="bench-0")
    value = os.urandom(value_bytes)

    def own(i: int) -> list[tuple[str, bytes]]:
        return [(f"h{h}", b"trace-%026d" % i if distinct and h == 0 else b"header-value") for h in range(headers)]

    for start in range(0, records, 100_000):
        log.append(batch_from_records([make_record(i, b"key-%012d" % i, value, 1_700_000_000_000 + i, own(i))
                                       for i in range(start, min(records, start + 100_000))]))
    log.roll()
    return log


def bare(bootstrap: str, topic: str, rows: list[tuple], per_transaction: int) -> float:
    """The emit limit: produce, flush and commit, nothing else."""
    producer = Producer(with_client_log({"bootstrap.servers": bootstrap, "transactional.id": f"bench-{topic}",
                                         "enable.idempotence": True, "linger.ms": 5}))
    producer.init_transactions(30)
    t = time.perf_counter()
    produce = producer.produce
    for start in range(0, len(rows), per_transaction):
        producer.begin_transaction()
        for offset, timestamp, key, value, own in rows[start:start + per_transaction]:  # own: (key, value) pairs
            while True:
                try:
                    produce(topic, key=key, value=value, partition=0, timestamp=timestamp,
                            headers=ORIGINS.sink_headers([*own, (OFFSET_HEADER, offset_header.encode(offset))]))
                    break
                except BufferError:  # a transaction beyond the queue's 100k records: wait for room, as the emitter does
                    producer.poll(0.05)
        producer.flush(60)
        producer.commit_transaction(60)
    seconds = time.perf_counter() - t
    producer.flush(10)
    return seconds


def librdkafka(bootstrap: str, topic: str, log: PartitionLog, per_transaction: int) -> float:
    """librdkafka's own rate in C: the same transactions, each one run of records handed to rd_kafka_producev
    in a C loop (streaming.kafka.sink.batch_produce), with no Python between records. The producing thread's CPU
    inside those calls goes to ``PRODUCE_CPU_S``: where librdkafka would copy each value (RD_KAFKA_MSG_F_COPY)."""
    producer = Producer(with_client_log({"bootstrap.servers": bootstrap, "transactional.id": f"bench-{topic}",
                                         "enable.idempotence": True, "linger.ms": 5}))
    producer.init_transactions(30)
    held = HeldBuffers(producer)
    produce = BatchProduce(held, DEFAULT_CLIENT_ID, topic, 0, ORIGINS)
    t = time.perf_counter()
    cols = [Columns.of(batch) for batch in log.read_batches(0, log.log_end_offset)]
    for part in cols:
        for start in range(0, len(part.offsets), per_transaction):
            producer.begin_transaction()
            before = time.thread_time()
            produce.produce_all(part, start, min(len(part.offsets), start + per_transaction), serve=0.05)
            PRODUCE_CPU_S.append(time.thread_time() - before)
            if left := producer.flush(60):
                raise RuntimeError(f"{left} records not acknowledged in 60 s")
            held.let_go()
            producer.commit_transaction(60)
    seconds = time.perf_counter() - t
    producer.flush(10)
    return seconds


def emitter(bootstrap: str, topic: str, log: PartitionLog, per_transaction: int) -> float:
    sink = TaskEmitter(bootstrap, f"bench-{topic}", transaction_records=per_transaction, origins=ORIGINS)
    t = time.perf_counter()
    sink.emit([(SinkPartition(PartitionId(topic, 0), -1), log.read_batches(0, log.log_end_offset))])
    seconds = time.perf_counter() - t
    sink.close()
    return seconds


def _cpu_s() -> float:
    """This process's CPU-seconds so far: the side's Python and librdkafka's threads, not the broker's."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--value-bytes", type=int, default=100)
    ap.add_argument("--headers", type=int, default=0, help="headers of each record's own, besides kcompact.offset")
    ap.add_argument("--distinct-headers", action="store_true", help="the first header differs in every record")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--transaction-records", default=str(TRANSACTION_RECORDS),
                    help="comma-separated records a transaction (emit.transaction.records), each measured")
    args = ap.parse_args()
    sizes = [int(n) for n in args.transaction_records.split(",")]
    work = tempfile.mkdtemp(prefix="kcompact-bench-emit-")
    try:
        log = fill_log(os.path.join(work, "log"), args.records, args.value_bytes, args.headers,
                       args.distinct_headers)
        t = time.perf_counter()
        for batch in log.read_batches():  # what the emitter reads, by column (streaming.kafka.sink.batch_produce)
            Columns.of(batch)
        read_s = time.perf_counter() - t
        rows = [(r["offset"], r["timestamp"], r["key"], r["value"], [(h["key"], h["value"]) for h in r["headers"]])
                for r in log.read()]
        sides: dict[tuple[str, int], list[float]] = {(n, size): [] for n in ("bare", "librdkafka", "emitter")
                                                     for size in sizes}
        cpu: dict[tuple[str, int], list[float]] = {side: [] for side in sides}
        calls: dict[int, list[float]] = {size: [] for size in sizes}
        with acquire_broker() as broker:
            bs = broker.bootstrap_servers
            for i in range(args.rounds):
                order = list(sides) if i % 2 == 0 else list(reversed(sides))
                for name, size in order:
                    topic = create_topic(bs, unique_topic_name(f"bench-emit-{name}"), 1, {"retention.ms": "-1"})
                    before = _cpu_s()
                    PRODUCE_CPU_S.clear()
                    seconds = (bare(bs, topic, rows, size) if name == "bare" else
                               librdkafka(bs, topic, log, size) if name == "librdkafka" else emitter(bs, topic, log, size))
                    sides[(name, size)].append(seconds)
                    cpu[(name, size)].append(_cpu_s() - before)
                    if name == "librdkafka":
                        calls[size].append(sum(PRODUCE_CPU_S))
                    print(f"round {i + 1}: {name:<7} {size:>7} a transaction {seconds:6.2f}s "
                          f"({args.records / seconds:,.0f} records/s), {cpu[(name, size)][-1]:.2f} CPU-s", flush=True)
        for size in sizes:
            b, c, e = (statistics.median(sides[(n, size)]) for n in ("bare", "librdkafka", "emitter"))
            print(f"{args.records:,} records of {args.value_bytes} bytes, {args.headers} headers of their own"
                  f"{' (the first distinct)' if args.distinct_headers else ''}, {size:,} a transaction, median of "
                  f"{args.rounds}: bare transactional producer {b:.2f}s, librdkafka in C {c:.2f}s, emitter {e:.2f}s "
                  f"(its log read alone {read_s:.2f}s); emitter / bare = {e / b:.3f}, emitter / librdkafka = "
                  f"{e / c:.3f}; CPU-s of this process (librdkafka's threads included), the same order: "
                  f"{', '.join(f'{statistics.median(cpu[(n, size)]):.2f}' for n in ('bare', 'librdkafka', 'emitter'))}"
                  f"; the C side's thread CPU inside its produce calls {statistics.median(calls[size]):.3f} s")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
