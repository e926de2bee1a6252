"""The sides bench_pipeline.py measures on one broker: making and filling topics, the pipeline (`kcompact run
--once` semantics, in this process's Spark), a bare consume (the read limit), a bare mirror and MirrorMaker 2
with its defaults and tuned. Each side returns its seconds; the caller times the broker's CPU around it."""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from streaming.brokers.local.jars import ensure_kafka_jars
from streaming.cleaner import CompactionConfig, JobSettings
from streaming.erasure.events import AuditKeys
from streaming.job.options import RunOptions
from streaming.job.runner import CompactorJob
from streaming.job.spec import JobMapping, JobSpec, TopicPlan
from streaming.kafka.admin import Cluster, create_topic, unique_topic_name
from streaming.partition_id import PartitionId
from streaming.kafka.client_log import with_client_log  # the benchmark's own clients: no librdkafka lines on stderr
from streaming.spark.driver import SparkEngine
from streaming.spark.source.kafka_source import FETCH_QUEUE_BACKOFF_MS, MAX_PARTITION_FETCH_BYTES
from streaming.configuration.subscription import Subscribe

HOUR = 3_600_000
MM2_POM = Path(__file__).with_name("mirror_maker") / "pom.xml"
# The settings a user tunes MirrorMaker 2's throughput with first (the issue that set the 2x target measured
# these): bigger producer batches, lingering for them, and more records per consumer poll.
MM2_TUNED = {"producer.linger.ms": "20", "producer.batch.size": "1000000", "consumer.max.poll.records": "5000"}


def produce(bootstrap: str, topic: str | list[str], records: int, keys: int, partitions: int, ts: int,
            tombstone_every: int = 0, value_bytes: int = 100, hot_share: float = 0.0) -> None:
    """Record i has key i mod ``keys`` (so every key's last record is among the last ``keys``), in the
    partition of its key, as Kafka's partitioner keeps a key in one partition. Over topics, a key lives in
    one topic: with ``hot_share`` (0.9), that share of the keys, and so of the records, is in the first tenth
    of the topics."""
    topics = [topic] if isinstance(topic, str) else topic
    hot = max(1, len(topics) // 10) if hot_share and len(topics) > 1 else 0

    hot_keys = round(100 * hot_share)  # of every 100 keys

    def place(key: int) -> tuple[str, int]:
        if len(topics) == 1:
            return topics[0], key % partitions
        if hot and key % 100 < hot_keys:  # the j-th hot key, then round the hot topics' partitions
            first, count, j = 0, hot, key // 100 * hot_keys + key % 100
        else:  # the j-th cold key, round every other topic's partitions
            first, count, j = hot, len(topics) - hot, key // 100 * (100 - hot_keys) + key % 100 - hot_keys
        return topics[first + j % count], j // count % partitions

    producer = Producer(with_client_log({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1_000_000,
                                         "queue.buffering.max.messages": 2_000_000,
                                         "queue.buffering.max.kbytes": 2_000_000}))
    value = os.urandom(value_bytes)
    for i in range(records):
        while True:
            try:
                name, partition = place(i % keys)
                producer.produce(name, key=b"key-%012d" % (i % keys), partition=partition, timestamp=ts + i,
                                 value=None if tombstone_every and i % tombstone_every == tombstone_every - 1 else value)
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(120) == 0


def bare_mirror(bootstrap: str, source: str, sink: str, partitions: int) -> float:
    t = time.perf_counter()
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"mirror-{source}", "enable.auto.commit": False,
                         "isolation.level": "read_committed"})
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 20,
                         "batch.size": 1_000_000, "queue.buffering.max.messages": 2_000_000})
    remaining = sum(consumer.get_watermark_offsets(TopicPartition(source, p), cached=False)[1]
                    for p in range(partitions))
    consumer.assign([TopicPartition(source, p, 0) for p in range(partitions)])
    while remaining > 0:
        for m in consumer.consume(min(remaining, 10_000), timeout=1.0):
            if m.error() is None:
                while True:
                    try:
                        producer.produce(sink, key=m.key(), value=m.value(), partition=m.partition(),
                                         timestamp=m.timestamp()[1], headers=m.headers())
                        break
                    except BufferError:
                        producer.poll(0.05)
                remaining -= 1
        producer.poll(0)
    assert producer.flush(120) == 0
    consumer.close()
    return time.perf_counter() - t


@dataclass
class MirrorMakerRun:
    """A MirrorMaker 2 process copying topics into ``prefix`` + their names on the target cluster."""

    proc: subprocess.Popen
    log_path: str
    prefix: str

    def failure(self) -> RuntimeError:
        """Its log's errors and warnings, for a run that ended or stalled."""
        with open(self.log_path) as f:
            tail = "\n".join(line for line in f.read().splitlines() if " ERROR " in line or " WARN " in line)[-3000:]
        return RuntimeError(f"MirrorMaker 2 ended or stalled (rc {self.proc.returncode}): {tail}")


@contextlib.contextmanager
def running_mirror_maker(bootstrap: str, topics: list[str], work: str, run: str, tuned: bool,
                         target_bootstrap: str | None = None) -> Iterator[MirrorMakerRun]:
    """MirrorMaker 2 copying ``topics`` to topics of the target cluster (the same broker if None), with cluster
    aliases of this run's own, so no run resumes another's offsets; stopped at the end, and its target and
    internal topics deleted, so the next side starts on brokers with nothing of this run left."""
    target = target_bootstrap or bootstrap
    jars = ensure_kafka_jars(MM2_POM)
    src, dst = f"s{run}", f"d{run}"
    props = {"clusters": f"{src}, {dst}", f"{src}.bootstrap.servers": bootstrap, f"{dst}.bootstrap.servers": target,
             f"{src}->{dst}.enabled": "true", f"{src}->{dst}.topics": ",".join(topics), f"{dst}->{src}.enabled": "false",
             "replication.factor": "1", "refresh.topics.interval.seconds": "1", "sync.topic.acls.enabled": "false",
             # copying only, as the pipeline is measured: heartbeats and checkpoints off (on one broker MM2 would
             # also copy the heartbeat topics earlier runs made, which no topic filter holds back)
             "emit.heartbeats.enabled": "false", "emit.checkpoints.enabled": "false",
             "sync.topic.configs.enabled": "false",
             **{f"{t}.replication.factor": "1" for t in ("checkpoints.topic", "heartbeats.topic", "offset-syncs.topic",
                                                         "offset.storage", "status.storage", "config.storage")},
             **(MM2_TUNED if tuned else {})}
    path = os.path.join(work, f"mm2-{run}.properties")
    with open(path, "w") as f:
        f.writelines(f"{k} = {v}\n" for k, v in props.items())
    log4j = os.path.join(work, "mm2-log4j2.properties")
    with open(log4j, "w") as f:  # INFO to its log file, so a failed run says why
        f.write("rootLogger.level = INFO\nrootLogger.appenderRef.out.ref = out\nappender.out.type = Console\n"
                "appender.out.name = out\nappender.out.layout.type = PatternLayout\n"
                "appender.out.layout.pattern = %d %p %c{1}: %m%n\n")
    log_path = os.path.join(work, f"mm2-{run}.log")
    with open(log_path, "w") as out:
        proc = subprocess.Popen(["java", "-Xmx1g", f"-Dlog4j2.configurationFile={log4j}", "-cp", jars.classpath,
                                 "org.apache.kafka.connect.mirror.MirrorMaker", path],
                                stdout=out, stderr=subprocess.STDOUT)
    try:
        yield MirrorMakerRun(proc, log_path, f"{src}.")
    finally:
        proc.terminate()
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(30)
        for cluster in {bootstrap, target}:
            admin = AdminClient(with_client_log({"bootstrap.servers": cluster}))
            made = [t for t in admin.list_topics(timeout=10).topics if t.startswith(f"{src}.") or f".{dst}." in t]
            for future in admin.delete_topics(made).values() if made else ():
                future.result(60)


def mirror_maker(bootstrap: str, source: str | list[str], partitions: int, records: int, work: str, run: str,
                 tuned: bool, target_bootstrap: str | None = None) -> float:
    """MirrorMaker 2 copying ``source`` (a topic, or topics of ``partitions`` each): seconds from its first
    record in the targets to its last."""
    topics = [source] if isinstance(source, str) else source
    with running_mirror_maker(bootstrap, topics, work, run, tuned, target_bootstrap) as mm2:
        targets = [PartitionId(f"{mm2.prefix}{t}", p) for t in topics for p in range(partitions)]
        watched = Cluster("sink", target_bootstrap or bootstrap)
        first = last = None
        deadline = time.monotonic() + 600
        while last is None:
            if mm2.proc.poll() is not None or time.monotonic() > deadline:
                raise mm2.failure()
            time.sleep(0.02)
            try:
                copied = sum(watched.end_offsets(targets).values())
            except KafkaException:  # the targets are not made yet, or their leaders are not elected yet
                continue
            now = time.perf_counter()
            if copied and first is None:
                first = now
            if copied >= records:
                last = now
    return last - first


def bare_consume(bootstrap: str, source: str | list[str], partitions: int) -> float:
    """The read limit: one consumer with the source's fetch settings reading every record of the topic (or
    topics, ``partitions`` each), nothing else."""
    t = time.perf_counter()
    topics = [source] if isinstance(source, str) else source
    consumer = Consumer(with_client_log({
        "bootstrap.servers": bootstrap, "group.id": f"consume-{topics[0]}", "enable.auto.commit": False,
        "isolation.level": "read_committed", "fetch.queue.backoff.ms": FETCH_QUEUE_BACKOFF_MS,
        "max.partition.fetch.bytes": MAX_PARTITION_FETCH_BYTES}))
    remaining = sum(high for _, high in Cluster("source", bootstrap).offset_ranges(
        PartitionId(t, p) for t in topics for p in range(partitions)).values())
    consumer.assign([TopicPartition(t, p, 0) for t in topics for p in range(partitions)])
    while remaining > 0:
        remaining -= sum(1 for m in consumer.consume(min(remaining, 10_000), timeout=1.0) if m.error() is None)
    consumer.close()
    return time.perf_counter() - t


def warm_up_topic(bootstrap: str, records: int, partitions: int) -> str:
    topic = create_topic(bootstrap, unique_topic_name("bench-warm"), partitions, {"retention.ms": "-1"})
    produce(bootstrap, topic, records, records // 10, partitions, int(time.time() * 1000) - 2 * HOUR)
    return topic


def delete_topic(bootstrap: str, topic: str) -> None:
    delete_topics(bootstrap, [topic])


def new_sink(bootstrap: str, partitions: int) -> str:
    """A sink as `kcompact run` makes it, but not compacted by the broker."""
    return new_sinks(bootstrap, partitions, 1)[0]


def new_sinks(bootstrap: str, partitions: int, count: int) -> list[str]:
    sinks = [unique_topic_name("bench-sink") for _ in range(count)]
    Cluster("sink", bootstrap).ensure_topics({s: (partitions, {"cleanup.policy": "delete", "retention.ms": "-1"})
                                             for s in sinks}, "sink")
    return sinks


def new_topics(bootstrap: str, prefix: str, count: int, partitions: int, compacted: bool = False) -> list[str]:
    """``count`` topics in one request, named to sort in order of making; kept forever, or ``compacted``."""
    base = unique_topic_name(prefix)
    topics = [f"{base}-{i:04d}" for i in range(count)]
    config = {"cleanup.policy": "compact"} if compacted else {"retention.ms": "-1"}
    Cluster("source", bootstrap).ensure_topics({t: (partitions, config) for t in topics}, "source")
    return topics


def delete_topics(bootstrap: str, topics: list[str]) -> None:
    admin = AdminClient(with_client_log({"bootstrap.servers": bootstrap}))  # held until the deletion is done
    for future in admin.delete_topics(topics).values():
        future.result(60)


def run_job(spark, bootstrap: str, source: str | list[str], sink: str | list[str], state_dir: str,
            audit: AuditKeys = AuditKeys.HASH, sink_bootstrap: str | None = None,
            kafka_native: bool = True) -> tuple[float, CompactorJob]:
    """``source`` and ``sink``: a topic each, or topics in pairs; the sink on ``sink_bootstrap`` (the source's
    cluster if None); ``kafka_native`` False: the plain path (--kafka-native off)."""
    sources, sinks = ([source], [sink]) if isinstance(source, str) else (source, sink)
    mapping = JobMapping(bootstrap, Subscribe(tuple(sources)), sink_bootstrap or bootstrap,
                         sinks[0] if len(sinks) == 1 else "{topic}.s")
    counts = {t: len(m.partitions) for t, m in Cluster("source", bootstrap).metadata().topics.items() if t in sources}
    settings = JobSettings(erase_audit_keys=audit)
    config = settings.over(CompactionConfig(max_compaction_lag_ms=60_000))
    plans = {t: TopicPlan(t, s, config, counts[t]) for t, s in zip(sources, sinks, strict=True)}
    spec = JobSpec(mapping, state_dir, plans, settings=settings, kafka_native=kafka_native)
    job = CompactorJob(SparkEngine(spark), spec, RunOptions(once=True))
    t = time.perf_counter()
    assert job.run() == 0
    return time.perf_counter() - t, job


@dataclass
class Side:
    seconds: float
    broker_cpu: float
    link_bytes: int = 0  # bytes that crossed the WAN link during the side, both ways (0: no link)
