"""Soak: the compactor running continuously on a live three-node cluster for a long time, with the faults of
an ordinary week packed into it, and the sink checked against the source at the end.

    python bench/bench_soak.py [--minutes 20 --rate 400 --partitions 4 --keys 2000 --restart-every-s 240 --kills 2]

A producer writes at a steady rate (updates, every 11th a tombstone, and one record of a key written only once
per batch) into a topic of a local 3-node Apache Kafka (replication 3, min.insync.replicas 2). The compactor
runs as an operator runs it (`kcompact run`, a process of its own). Every --restart-every-s one broker is
restarted (SIGTERM, then started again on its data), in turn; the compactor is SIGKILLed --kills times,
spread over the run, and started again. At the end the producer stops, the sink is waited for, the job
stops with SIGTERM, and an independent read of source and sink gives the figures:

    records in, sink records, lost (records that should be in the sink and are not: must be 0), duplicated
    (a source offset twice in a partition: must be 0), the compactor's memory (its process, the JVM and the
    Python workers) at start and end, the state dir's files at start and end, and the emit lag (from a
    record's timestamp to its arrival in the sink) p50 and p99.

tests/e2e/test_cluster_faults.py runs a 3-minute version in CI on the same cluster as the failover tests.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition

from streaming.brokers.broker import Broker
from streaming.brokers.choice import start_local_cluster
from streaming.kafka.admin import create_topic, unique_topic_name
from streaming.kafka.emitter import source_offset

TOMBSTONE_EVERY = 11
SINK_CONFIG = ["--sink-topic-config", "cleanup.policy=delete", "--sink-topic-config", "retention.ms=-1"]


@dataclass
class Produced:
    """What the producer wrote, per partition: offset -> (key, value)."""

    records: dict[int, dict[int, tuple[bytes, bytes | None]]] = field(default_factory=dict)

    def add(self, partition: int, offset: int, key: bytes, value: bytes | None) -> None:
        self.records.setdefault(partition, {})[offset] = (key, value)


class SteadyProducer(threading.Thread):
    """``rate`` records a second, in batches of a tenth of a second; waits out outages (it never drops one)."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, keys: int, rate: int) -> None:
        super().__init__(daemon=True)
        self.topic, self.partitions, self.keys, self.rate = topic, partitions, keys, rate
        self.producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5,
                                  "delivery.timeout.ms": 600_000, "acks": "all"})
        self.produced = Produced()
        self.failures: list[str] = []
        self.halt = threading.Event()

    def run(self) -> None:
        i, batch = 0, max(1, self.rate // 10)
        while not self.halt.is_set():
            started = time.monotonic()
            for j in range(batch):
                n = i + j
                key = b"once-%d" % n if j == 0 else b"key-%d" % (n % self.keys)
                value = None if j and n % TOMBSTONE_EVERY == 0 else b"value-%d" % n
                self._send(n % self.partitions, key, value)
            i += batch
            self.producer.poll(0)
            self.halt.wait(max(0.0, 0.1 - (time.monotonic() - started)))
        if self.producer.flush(600) != 0:
            self.failures.append("records not acknowledged within 600 s")

    def _send(self, partition: int, key: bytes, value: bytes | None) -> None:
        def delivered(err, msg) -> None:
            if err is not None:
                self.failures.append(str(err))
            else:
                self.produced.add(msg.partition(), msg.offset(), msg.key(), msg.value())
        while True:
            try:
                self.producer.produce(self.topic, key=key, value=value, partition=partition, on_delivery=delivered)
                return
            except BufferError:
                self.producer.poll(0.1)


class SinkWatcher(threading.Thread):
    """Reads the sink as it fills (read_committed) and notes each record's emit lag."""

    def __init__(self, bootstrap: str, topic: str, partitions: int) -> None:
        super().__init__(daemon=True)
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"soak-{topic}",
                                  "enable.auto.commit": False, "isolation.level": "read_committed",
                                  "auto.offset.reset": "earliest", "topic.metadata.refresh.interval.ms": 1000})
        self.topic, self.partitions = topic, partitions
        self.lags_ms: list[int] = []
        self.halt = threading.Event()

    def run(self) -> None:
        while not self.halt.is_set():
            if self.topic in self.consumer.list_topics(timeout=10).topics:
                break
            time.sleep(1)
        self.consumer.assign([TopicPartition(self.topic, p, 0) for p in range(self.partitions)])
        while not self.halt.is_set():
            for m in self.consumer.consume(1000, timeout=1.0):
                if m.error() is None:
                    self.lags_ms.append(int(time.time() * 1000) - m.timestamp()[1])
        self.consumer.close()


def process_rss_mb(pid: int) -> float:
    """Resident memory of a process and all its descendants (the job's JVM and Python workers), in MiB."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read().rsplit(")", 1)[1].split()
            children.setdefault(int(stat[1]), []).append(int(entry))
            rss[int(entry)] = int(stat[21]) * os.sysconf("SC_PAGE_SIZE")
        except (OSError, IndexError, ValueError):
            continue
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        total += rss.get(p, 0)
        todo.extend(children.get(p, []))
    return total / 2**20


def files_under(path: Path) -> int:
    return sum(len(files) for _, _, files in os.walk(path))


def read_all(bootstrap: str, topic: str, partitions: int) -> dict[int, list]:
    """Every committed record of each partition, up to its high watermark now."""
    out: dict[int, list] = {}
    for p in range(partitions):
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"soak-read-{time.time_ns()}",
                             "enable.auto.commit": False, "isolation.level": "read_committed"})
        tp = TopicPartition(topic, p)
        high = consumer.get_watermark_offsets(tp, timeout=30, cached=False)[1]
        consumer.assign([TopicPartition(topic, p, 0)])
        records = []
        deadline = time.monotonic() + 300
        while high and consumer.position([tp])[0].offset < high:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{topic}-{p}: could not read to its end {high} within 300 s")
            records += [m for m in consumer.consume(5000, timeout=1.0) if m.error() is None and m.offset() < high]
        consumer.close()
        out[p] = records
    return out


@dataclass
class SoakResult:
    records_in: int
    sink_records: int
    lost: int
    duplicated: int
    rss_start_mb: float
    rss_end_mb: float
    files_start: int
    files_end: int
    lag_p50_s: float
    lag_p99_s: float
    broker_restarts: int
    compactor_kills: int

    def lines(self) -> list[str]:
        return [f"records in: {self.records_in}", f"sink records: {self.sink_records}", f"lost: {self.lost}",
                f"duplicated: {self.duplicated}",
                f"compactor memory (process tree RSS): {self.rss_start_mb:.0f} MiB at start, {self.rss_end_mb:.0f} MiB "
                f"at end", f"state dir files: {self.files_start} at start, {self.files_end} at end",
                f"emit lag: p50 {self.lag_p50_s:.2f} s, p99 {self.lag_p99_s:.2f} s",
                f"faults: {self.broker_restarts} broker restarts, {self.compactor_kills} compactor SIGKILLs"]


def _winners(produced: dict[int, tuple[bytes, bytes | None]]) -> dict[bytes, int]:
    best: dict[bytes, int] = {}
    for offset in sorted(produced):
        best[produced[offset][0]] = offset
    return best


def soak(broker: Broker, minutes: float, rate: int = 400, partitions: int = 4, keys: int = 2000,
         restart_every_s: float = 240, kills: int = 2, work: Path | None = None) -> SoakResult:
    cluster = broker.cluster
    work = work or Path(tempfile.mkdtemp(prefix="kcompact-soak-"))
    bootstrap = broker.bootstrap_servers
    src = create_topic(bootstrap, unique_topic_name("soak"), partitions, {"retention.ms": "-1"})
    sink = unique_topic_name("soak-sink")
    state = work / "state"
    command = [sys.executable, "-m", "streaming", "--log-level", "WARNING", "run", "--bootstrap-servers", bootstrap,
               "--source-topic", src, "--sink-topic", sink, "--state-dir", str(state), "--trigger-interval", "1",
               "--config", "max.compaction.lag.ms=5000", "--config", "min.cleanable.dirty.ratio=0.2",
               "--config", "file.delete.delay.ms=10000", *SINK_CONFIG]
    log = open(work / "job.log", "ab")  # noqa: SIM115 (every restarted job writes to it; closed after the last)

    def start_job() -> subprocess.Popen:
        return subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)

    producer, watcher = SteadyProducer(bootstrap, src, partitions, keys, rate), SinkWatcher(bootstrap, sink, partitions)
    producer.start()
    job = start_job()
    watcher.start()
    duration = minutes * 60
    started = time.monotonic()
    kill_at = [started + duration * (k + 1) / (kills + 1) for k in range(kills)]
    next_restart, node, restarts, killed = started + restart_every_s, 1, 0, 0
    time.sleep(min(60.0, duration / 4))  # the job's start-up and first stages: "at start" is after them
    rss_start, files_start = process_rss_mb(job.pid), files_under(state)
    while time.monotonic() - started < duration:
        now = time.monotonic()
        if job.poll() is not None:
            raise RuntimeError(f"the compactor exited with {job.returncode}; see {work / 'job.log'}")
        if kill_at and now >= kill_at[0]:
            kill_at.pop(0)
            job.kill()
            job.wait()
            job, killed = start_job(), killed + 1
        if now >= next_restart:
            cluster.terminate(node)
            cluster.restart(node)
            node, restarts, next_restart = node % len(cluster.nodes) + 1, restarts + 1, now + restart_every_s
        time.sleep(1)
    rss_end, files_end = process_rss_mb(job.pid), files_under(state)
    producer.halt.set()
    producer.join()
    if producer.failures:
        raise RuntimeError(f"the producer failed: {producer.failures[:3]}")
    produced = producer.produced.records
    want = {p: _winners(records) for p, records in produced.items()}
    deadline = time.monotonic() + 600
    while True:  # every key's final winner is the last sink record of its key
        got = read_all(bootstrap, sink, partitions)
        last = {p: {m.key(): source_offset(m.headers()) for m in got.get(p, [])} for p in range(partitions)}
        if all(last[p] == want.get(p, {}) for p in range(partitions)) or time.monotonic() > deadline:
            break
        time.sleep(5)
    job.send_signal(signal.SIGTERM)
    job.wait(300)
    watcher.halt.set()
    watcher.join()
    log.close()
    lost = duplicated = sink_records = 0
    for p in range(partitions):
        offsets = [source_offset(m.headers()) for m in got.get(p, [])]
        sink_records += len(offsets)
        duplicated += sum(n - 1 for n in Counter(offsets).values())
        arrived = set(offsets)
        written = Counter(key for key, _ in produced.get(p, {}).values())
        once = {o for o, (key, _) in produced.get(p, {}).items() if written[key] == 1}
        lost += len(once - arrived) + sum(1 for key, o in want.get(p, {}).items() if last[p].get(key) != o
                                          and o not in once)
    lags = sorted(watcher.lags_ms) or [0]
    return SoakResult(sum(len(r) for r in produced.values()), sink_records, lost, duplicated, rss_start, rss_end,
                      files_start, files_end, statistics.median(lags) / 1000,
                      lags[min(len(lags) - 1, int(len(lags) * 0.99))] / 1000, restarts, killed)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=20)
    parser.add_argument("--rate", type=int, default=400, help="records a second")
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--keys", type=int, default=2000)
    parser.add_argument("--restart-every-s", type=float, default=240)
    parser.add_argument("--kills", type=int, default=2)
    args = parser.parse_args()
    with start_local_cluster() as broker:
        result = soak(broker, args.minutes, args.rate, args.partitions, args.keys, args.restart_every_s, args.kills)
    print(f"soak: {args.minutes:g} minutes at {args.rate} records/s on a 3-node cluster")
    for line in result.lines():
        print(f"  {line}")


if __name__ == "__main__":
    main()
