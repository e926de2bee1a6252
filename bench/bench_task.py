"""CPU-microseconds a record of one ingest task, without Spark: what a source task does with a partition.

    python bench/bench_task.py [--records 2000000] [--keys 1000000] [--value-bytes 100] [--rounds 3]

One topic of one partition is produced (bench_pipeline's record i: key i mod --keys), then read in this
process, side by side in each round:
- consume: a bare confluent-kafka consumer taking every record (``consume()``, nothing done with them),
  what reading alone costs: the read limit's CPU;
- read: the source's read of the partition into Arrow batches (streaming.spark.source.kafka_source);
- ingest: that read appended to a partition log (streaming.job.append.append_partitions), the whole task;
- read-plain, ingest-plain: the same on the plain path (--kafka-native off: consume(), a Message per record).
CPU is this process's (every thread, librdkafka's included), per record; the medians of the rounds print.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import tempfile
import time

from confluent_kafka import Consumer, TopicPartition

from pipeline_sides import HOUR, produce
from streaming.brokers.choice import acquire_broker
from streaming.job.append import APPEND_ROWS, AppendTask, append_partitions
from streaming.kafka.admin import create_topic, unique_topic_name
from streaming.log import LogConfig
from streaming.spark.source.kafka_source import read_partition, read_ranges
from streaming.spark.source.range_read import OffsetRange
from streaming.spark.source.options import KafkaSourceOptions


def _cpu_us(work, records: int) -> float:
    """The work's CPU a record; it is handed a new state dir, removed after the clock stops."""
    with tempfile.TemporaryDirectory() as state:
        t = time.process_time()
        work(state)
        return (time.process_time() - t) * 1e6 / records


def bare_consume(bootstrap: str, topic: str, records: int) -> None:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": unique_topic_name("bench"),
                         "enable.auto.commit": False, "fetch.queue.backoff.ms": 10,
                         "max.partition.fetch.bytes": 8 << 20})
    consumer.assign([TopicPartition(topic, 0, 0)])
    seen = 0
    while seen < records:
        seen += len(consumer.consume(10_000, timeout=1.0))
    consumer.close()


def read(options: KafkaSourceOptions, topic: str, records: int) -> None:
    assert sum(b.num_rows for b in read_partition(options, topic, 0, 0, records)) == records


def ingest(options: KafkaSourceOptions, topic: str, records: int, state: str) -> None:
    """As the ingest source's task does it (streaming.spark.source.ingest): reads of an append's size."""
    task = AppendTask(state, {topic: LogConfig()}, int(time.time() * 1000))
    options = dataclasses.replace(options, records_per_batch=APPEND_ROWS)
    stats = next(append_partitions(read_ranges(options, [OffsetRange(topic, 0, 0, records)]), task))
    assert stats.column("appended")[0].as_py() == records


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=2_000_000)
    parser.add_argument("--keys", type=int, default=1_000_000)
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with acquire_broker() as broker:
        bs = broker.bootstrap_servers
        topic = create_topic(bs, unique_topic_name("bench-task"), 1, {"retention.ms": "-1"})
        produce(bs, topic, args.records, args.keys, 1, int(time.time() * 1000) - 2 * HOUR,
                value_bytes=args.value_bytes)
        options = KafkaSourceOptions.parse({"kafka.bootstrap.servers": bs, "subscribe": topic})
        plain = dataclasses.replace(options, kafka_native=False)
        sides = {"consume": lambda _: bare_consume(bs, topic, args.records),
                 "read": lambda _: read(options, topic, args.records),
                 "ingest": lambda state: ingest(options, topic, args.records, state),
                 "read-plain": lambda _: read(plain, topic, args.records),
                 "ingest-plain": lambda state: ingest(plain, topic, args.records, state)}
        _cpu_us(lambda state: ingest(options, topic, min(args.records, 100_000), state), 1)  # warm-up: the codec
        figures: dict[str, list[float]] = {side: [] for side in sides}
        for _ in range(args.rounds):
            for side, work in sides.items():
                figures[side].append(_cpu_us(work, args.records))
    print(f"{args.records:,} records, {args.keys:,} keys, {args.value_bytes} B values, one partition; "
          f"CPU-us a record, medians of {args.rounds} rounds")
    for side, values in figures.items():
        print(f"  {side:12s} {statistics.median(values):6.3f}   ({', '.join(f'{v:.3f}' for v in values)})")


if __name__ == "__main__":
    main()
