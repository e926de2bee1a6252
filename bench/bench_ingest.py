"""Ingest throughput: the Spark source + foreachBatch appender vs. a bare confluent-kafka consumer feeding
the same log code, on the same topic and broker, in one run.

    python bench/bench_ingest.py [--records 1000000] [--partitions 4]

The broker is the one the project's helper picks (KAFKA_BOOTSTRAP_SERVERS, Docker, or a local Apache Kafka).
Spark's session start-up is excluded from its time; the query from start to availableNow's end is in.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time

from confluent_kafka import Consumer, Producer, TopicPartition

from streaming.brokers.choice import acquire_broker
from streaming.job.append import LogAppender
from streaming.job.engine import QueryPlan, SourceRead
from streaming.configuration.subscription import Subscribe
from streaming.spark.driver import SparkEngine
from streaming.log import LogConfig, PartitionLog, make_record
from streaming.spark.session import build_session
from streaming.kafka.admin import create_topic, unique_topic_name


def produce(bootstrap: str, topic: str, records: int, partitions: int) -> float:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1_000_000,
                         "queue.buffering.max.messages": 2_000_000, "compression.type": "none"})
    value = os.urandom(100)
    t = time.perf_counter()
    for i in range(records):
        while True:
            try:
                producer.produce(topic, key=b"key-%012d" % (i % 100_000), value=value, partition=i % partitions,
                                 timestamp=1_700_000_000_000 + i)
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(120) == 0
    return time.perf_counter() - t


def bare_consumer(bootstrap: str, topic: str, partitions: int, state_dir: str, config: LogConfig) -> float:
    t = time.perf_counter()
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{topic}", "enable.auto.commit": False,
                         "isolation.level": "read_committed"})
    ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), cached=False)[1] for p in range(partitions)}
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    logs = {p: PartitionLog(os.path.join(state_dir, f"{topic}-{p}"), config, jitter_seed=f"{topic}-{p}")
            for p in range(partitions)}
    done = {p: 0 for p in range(partitions)}
    remaining = sum(ends.values())
    while remaining > 0:
        batch: dict[int, list] = {p: [] for p in range(partitions)}
        for m in consumer.consume(min(remaining, 50_000), timeout=1.0):
            if m.error() is None:
                batch[m.partition()].append(make_record(m.offset(), m.key(), m.value(), m.timestamp()[1],
                                                        m.headers()))
        for p, records in batch.items():
            if records:
                logs[p].append(records)
                done[p] += len(records)
                remaining -= len(records)
    consumer.close()
    return time.perf_counter() - t


def spark_ingest(spark, bootstrap: str, topic: str, state_dir: str, config: LogConfig) -> float:
    appender = LogAppender(state_dir, {topic: config})
    t = time.perf_counter()
    plan = QueryPlan(SourceRead(bootstrap, Subscribe((topic,))), os.path.join(state_dir, "checkpoint"), once=True)
    SparkEngine(spark).start_query(plan, appender).await_termination()
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--partitions", type=int, default=4)
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="kcompact-bench-ingest-")
    config = LogConfig()
    try:
        with acquire_broker() as broker:
            bs = broker.bootstrap_servers
            topic = create_topic(bs, unique_topic_name("bench-ingest"), args.partitions, {"retention.ms": "-1"})
            secs = produce(bs, topic, args.records, args.partitions)
            print(f"produced {args.records:,} records to {args.partitions} partitions in {secs:.1f}s")
            spark = build_session("kcompact-bench")
            spark_s = spark_ingest(spark, bs, topic, os.path.join(work, "spark"), config)
            bare_s = bare_consumer(bs, topic, args.partitions, os.path.join(work, "bare"), config)
            spark.stop()
        print(f"bare confluent-kafka -> log  {args.records / bare_s:10,.0f} records/s  {bare_s:6.1f}s")
        print(f"spark source -> foreachBatch {args.records / spark_s:10,.0f} records/s  {spark_s:6.1f}s")
        print(f"ratio spark/bare = {bare_s / spark_s:.3f}  (target >= 0.5)")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
