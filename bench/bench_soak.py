"""Soak: the compactor running continuously on a live three-node cluster for a long time, with the faults of
an ordinary week packed into it, and the sink checked against the source at the end.

    python bench/bench_soak.py [--minutes 20 --rate 400 --partitions 4 --keys 2000 --restart-every-s 240 --kills 2
                                [--sample-every-s 60 --out DIR]]

A producer writes at a steady rate (updates, every 11th a tombstone, and one record of a key written only once
per batch) into a topic of a local 3-node Apache Kafka (replication 3, min.insync.replicas 2). The compactor
runs as an operator runs it (`kcompact run`, a process of its own). Every --restart-every-s one broker is
restarted (SIGTERM, then started again on its data), in turn; the compactor is SIGKILLed --kills times,
spread over the run, and started again. At the end the producer stops, the sink is waited for, the job
stops with SIGTERM, and an independent read of source and sink gives the figures:

    records in, sink records, lost (records that should be in the sink and are not: must be 0), duplicated
    (a source offset twice in a partition: must be 0), kcompact verify's verdict, the state dir's files at
    start and end, and the emit lag (from a record's timestamp to its arrival in the sink) p50 and p99.

Every --sample-every-s it samples memory per process: the job's Python driver, its JVM (resident, and its heap
after a full GC through jcmd, where the JDK has it), each Python worker, and each broker node, with the state
dir's object count beside its live segments. The samples go to DIR/memory.csv and DIR/memory.png, and the
growth of each process that lived through the last 40 minutes (the second half of a shorter run) is printed:
a long-running job's memory must be flat there (at most 10% growth).

tests/e2e/test_cluster_faults.py runs a 3-minute version in CI on the same cluster as the failover tests.
"""

from __future__ import annotations

import argparse
import csv
import os
import re
import shutil
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
from streaming.cleaner import Overrides
from streaming.cli.status import collect_status
from streaming.kafka.admin import Cluster, create_topic, unique_topic_name
from streaming.kafka.client_log import with_client_log  # the soak's own clients: no librdkafka lines on stderr
from streaming.kafka.headers.offset_header import source_offset
from streaming.log.manifest import OBJECTS
from streaming.verify.mirror import MirroredPair, verify_topic
from streaming.verify.oracle import PartitionVerdict

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
        self.producer = Producer(with_client_log({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                                                  "linger.ms": 5, "delivery.timeout.ms": 600_000, "acks": "all"}))
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


WINDOW_MIN = 40.0  # memory must be flat over the run's last 40 minutes
GROWTH_LIMIT = 0.10
HEAP = re.compile(r"heap\s+total (\d+)K, used (\d+)K")


@dataclass(frozen=True)
class Process:
    role: str  # "driver", "driver JVM", "python worker", "broker node 2"
    pid: int

    @property
    def name(self) -> str:
        return f"{self.role} {self.pid}"


def _proc_table() -> dict[int, tuple[int, str, int]]:
    """pid -> (parent, command name, resident bytes) for every live process now (zombies left out)."""
    out = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                head, _, rest = f.read().rpartition(")")
            stat = rest.split()
            if stat[0] != "Z":
                out[int(entry)] = (int(stat[1]), head.split("(", 1)[1], int(stat[21]) * os.sysconf("SC_PAGE_SIZE"))
        except (OSError, IndexError, ValueError):
            continue
    return out


def job_processes(job_pid: int, brokers: dict[int, int]) -> tuple[list[Process], dict[int, int]]:
    """The job's process tree by role, and every broker node's JVM; with each one's resident bytes."""
    table = _proc_table()
    children: dict[int, list[int]] = {}
    for pid, (parent, _, _) in table.items():
        children.setdefault(parent, []).append(pid)
    found = [Process("driver", job_pid)] if job_pid in table else []
    todo = list(children.get(job_pid, []))
    while todo:
        pid = todo.pop()
        todo.extend(children.get(pid, []))
        comm = table[pid][1]
        found.append(Process("driver JVM" if comm == "java" else "python worker" if comm.startswith("python")
                             else comm, pid))
    found += [Process(f"broker node {node}", pid) for node, pid in brokers.items() if pid in table]
    return found, {p.pid: table.get(p.pid, (0, "", 0))[2] for p in found}


def heap_after_full_gc_mb(pid: int) -> float | None:
    """The JVM's used heap just after a full collection (jcmd GC.run, then GC.heap_info); None without jcmd."""
    jcmd = shutil.which("jcmd")
    if jcmd is None:
        return None
    try:
        subprocess.run([jcmd, str(pid), "GC.run"], capture_output=True, timeout=60, check=True)
        info = subprocess.run([jcmd, str(pid), "GC.heap_info"], capture_output=True, text=True, timeout=60,
                              check=True).stdout
    except (subprocess.SubprocessError, OSError):
        return None
    found = HEAP.search(info)
    return None if found is None else int(found[2]) / 1024


def state_objects(state: Path) -> tuple[int, int]:
    """(object files in the logs' object dirs, segments the logs' newest manifests hold)."""
    objects = sum(len(files) for root, _, files in os.walk(state) if Path(root).name == OBJECTS)
    status = collect_status(str(state), int(time.time() * 1000))
    return objects, sum(p.segments or 0 for p in status.partitions)


def window_start(minutes: float) -> float:
    """The minute the flat-memory window starts: the last 40 minutes, or the second half of a shorter run."""
    return minutes - WINDOW_MIN if minutes > WINDOW_MIN else minutes / 2


@dataclass(frozen=True)
class Growth:
    trend: float   # the last samples' median over the first samples' median, less one
    spread: float  # the largest sample over the smallest, less one


@dataclass(frozen=True)
class Sample:
    minute: float
    process: str
    rss_mb: float
    heap_mb: float | None = None


@dataclass
class MemoryLog:
    """Samples as they come, written to a CSV at once so a run cut short keeps what it measured."""

    path: Path
    samples: list[Sample] = field(default_factory=list)
    objects: list[tuple[float, int, int]] = field(default_factory=list)  # (minute, objects, live segments)

    def __post_init__(self) -> None:
        with open(self.path, "w", newline="") as f:
            csv.writer(f).writerow(["minute", "process", "rss_mb", "heap_after_full_gc_mb"])
        with open(self._objects_path, "w", newline="") as f:
            csv.writer(f).writerow(["minute", "objects", "live_segments"])

    @property
    def _objects_path(self) -> Path:
        return self.path.with_name("objects.csv")

    def take(self, minute: float, job_pid: int, brokers: dict[int, int], state: Path) -> list[Process]:
        """A sample of every process; the processes sampled."""
        processes, rss = job_processes(job_pid, brokers)
        new = [Sample(minute, p.name, rss[p.pid] / 2**20,
                      heap_after_full_gc_mb(p.pid) if p.role == "driver JVM" else None) for p in processes]
        self.samples += new
        with open(self.path, "a", newline="") as f:
            csv.writer(f).writerows([s.minute, s.process, f"{s.rss_mb:.1f}",
                                     "" if s.heap_mb is None else f"{s.heap_mb:.1f}"] for s in new)
        if state.exists():
            self.objects.append((minute, *state_objects(state)))
            with open(self._objects_path, "a", newline="") as f:
                csv.writer(f).writerow(self.objects[-1])
        return processes

    @classmethod
    def read(cls, path: Path) -> "MemoryLog":
        """The samples of an earlier run (its memory.csv), to report on again."""
        with open(path, newline="") as f:
            rows = list(csv.DictReader(f))
        memory = cls.__new__(cls)
        memory.path, memory.objects = path, []
        if memory._objects_path.exists():
            with open(memory._objects_path, newline="") as f:
                memory.objects = [(float(r["minute"]), int(r["objects"]), int(r["live_segments"]))
                                  for r in csv.DictReader(f)]
        memory.samples = [Sample(float(r["minute"]), r["process"], float(r["rss_mb"]),
                                 float(r["heap_after_full_gc_mb"]) if r["heap_after_full_gc_mb"] else None) for r in rows]
        return memory

    def growth(self, minutes: float) -> dict[str, Growth]:
        """Each series' growth over the window, for the processes sampled at its start and at the run's end (a
        restarted process is another): the median of its last few samples over the median of its first few, so
        a JVM whose committed heap breathes from one sample to the next is not taken for one that grows."""
        start = window_start(minutes)
        last = max((s.minute for s in self.samples), default=0.0)
        series: dict[str, list[tuple[float, float]]] = {}
        for s in self.samples:
            series.setdefault(f"{s.process} rss", []).append((s.minute, s.rss_mb))
            if s.heap_mb is not None:
                series.setdefault(f"{s.process} heap", []).append((s.minute, s.heap_mb))
        out = {}
        for name, points in series.items():
            inside = [v for m, v in points if m >= start]
            if points[0][0] > start or points[-1][0] != last or len(inside) < 2 or min(inside) <= 0:
                continue
            k = max(1, min(5, len(inside) // 4))
            out[name] = Growth(statistics.median(inside[-k:]) / statistics.median(inside[:k]) - 1,
                               max(inside) / min(inside) - 1)
        return out

    def plot(self, path: Path, title: str) -> None:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, (rss_ax, heap_ax) = plt.subplots(2, 1, figsize=(10, 8), sharex=True)
        by_process: dict[str, list[Sample]] = {}
        for s in self.samples:
            by_process.setdefault(s.process, []).append(s)
        for name, samples in sorted(by_process.items()):
            if len(samples) > 1:
                rss_ax.plot([s.minute for s in samples], [s.rss_mb for s in samples], label=name)
            heap = [s for s in samples if s.heap_mb is not None]
            if heap:
                heap_ax.plot([s.minute for s in heap], [s.heap_mb for s in heap], label=f"{name} heap after full GC")
        if self.objects:
            heap_ax.plot([m for m, _, _ in self.objects], [o for _, o, _ in self.objects], "k--",
                         label="state dir objects")
            heap_ax.plot([m for m, _, _ in self.objects], [s for _, _, s in self.objects], "k:",
                         label="live segments")
        rss_ax.set_ylabel("resident MiB")
        heap_ax.set_ylabel("MiB / count")
        heap_ax.set_xlabel("minute")
        rss_ax.set_title(title)
        for ax in (rss_ax, heap_ax):
            ax.set_ylim(bottom=0)
            ax.grid(alpha=0.3)
            ax.legend(fontsize=7, loc="upper left")
        fig.tight_layout()
        fig.savefig(path, dpi=100)
        plt.close(fig)


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
    verify_lines: list[str]
    verified: bool
    memory: MemoryLog
    growth: dict[str, Growth]
    objects_over_segments: int  # the most object files beyond the live segments, over the window
    lag_p50_s: float
    lag_p99_s: float
    broker_restarts: int
    compactor_kills: int

    @property
    def flat(self) -> bool:
        return all(g.trend <= GROWTH_LIMIT for g in self.growth.values())

    def lines(self) -> list[str]:
        grown = sorted(self.growth.items(), key=lambda kv: -kv[1].trend)
        return [f"records in: {self.records_in}", f"sink records: {self.sink_records}", f"lost: {self.lost}",
                f"duplicated: {self.duplicated}",
                f"kcompact verify: {'clean' if self.verified else 'MISMATCHES'}",
                *(f"  {line}" for line in self.verify_lines),
                f"memory over the window ({'flat' if self.flat else 'GREW'}, limit {GROWTH_LIMIT:.0%}):",
                *(f"  {name}: {g.trend:+.1%} (samples within {g.spread:.0%} of each other)" for name, g in grown),
                f"state dir objects beyond the live segments, at most: {self.objects_over_segments}",
                f"emit lag: p50 {self.lag_p50_s:.2f} s, p99 {self.lag_p99_s:.2f} s",
                f"faults: {self.broker_restarts} broker restarts, {self.compactor_kills} compactor SIGKILLs",
                f"samples: {self.memory.path} (plot beside it)"]


def _winners(produced: dict[int, tuple[bytes, bytes | None]]) -> dict[bytes, int]:
    best: dict[bytes, int] = {}
    for offset in sorted(produced):
        best[produced[offset][0]] = offset
    return best


@dataclass(frozen=True)
class Tally:
    """The sink judged against what the producer wrote: an independent read of both, and kcompact verify's."""

    records_in: int
    sink_records: int
    lost: int        # records that should be in the sink and are not
    duplicated: int  # a source offset twice in a partition
    verdicts: list[PartitionVerdict]

    @property
    def verified(self) -> bool:
        return all(v.ok for v in self.verdicts)


def verify_mirror(source_bootstrap: str, src: str, sink_bootstrap: str, sink: str) -> list[PartitionVerdict]:
    """kcompact verify's check of one mirrored topic, a verdict per partition."""
    return list(verify_topic(Cluster("source", source_bootstrap), Cluster("sink", sink_bootstrap),
                             MirroredPair(src, sink), Overrides()))


def tally_sink(source_bootstrap: str, src: str, sink_bootstrap: str, sink: str, partitions: int,
               produced: Produced, wait_s: float = 600) -> Tally:
    """Waits (up to ``wait_s``) until every key's final winner is the last sink record of its key, then
    counts what is lost and what is twice, and runs kcompact verify's check."""
    records = produced.records
    want = {p: _winners(r) for p, r in records.items()}
    deadline = time.monotonic() + wait_s
    while True:
        got = read_all(sink_bootstrap, sink, partitions)
        last = {p: {m.key(): source_offset(m.headers()) for m in got.get(p, [])} for p in range(partitions)}
        if all(last[p] == want.get(p, {}) for p in range(partitions)) or time.monotonic() > deadline:
            break
        time.sleep(5)
    verdicts = verify_mirror(source_bootstrap, src, sink_bootstrap, sink)
    lost = duplicated = sink_records = 0
    for p in range(partitions):
        offsets = [source_offset(m.headers()) for m in got.get(p, [])]
        sink_records += len(offsets)
        duplicated += sum(n - 1 for n in Counter(offsets).values())
        arrived = set(offsets)
        written = Counter(key for key, _ in records.get(p, {}).values())
        once = {o for o, (key, _) in records.get(p, {}).items() if written[key] == 1}
        lost += len(once - arrived) + sum(1 for key, o in want.get(p, {}).items() if last[p].get(key) != o
                                          and o not in once)
    return Tally(sum(len(r) for r in records.values()), sink_records, lost, duplicated, verdicts)


def soak(broker: Broker, minutes: float, rate: int = 400, partitions: int = 4, keys: int = 2000,
         restart_every_s: float = 240, kills: int = 2, work: Path | None = None,
         sample_every_s: float = 60) -> SoakResult:
    """``restart_every_s`` <= 0: no broker restarts."""
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
    next_restart = started + restart_every_s if restart_every_s > 0 else float("inf")
    node, restarts, killed = 1, 0, 0
    memory = MemoryLog(work / "memory.csv")
    next_sample = started + min(sample_every_s, duration / 4)  # the first after the job's start-up
    workers_seen = False  # a sample of each started job's Python workers, once they exist: a job restarted
    while time.monotonic() - started < duration:  # just before a timed sample has none yet
        now = time.monotonic()
        nodes = {n.node_id: n.pid for n in cluster.nodes}
        timed = now >= next_sample
        if timed or not workers_seen and any(p.role == "python worker" for p in job_processes(job.pid, nodes)[0]):
            taken = memory.take((now - started) / 60, job.pid, nodes, state)
            workers_seen = workers_seen or any(p.role == "python worker" for p in taken)
            next_sample += sample_every_s if timed else 0
        if job.poll() is not None:
            raise RuntimeError(f"the compactor exited with {job.returncode}; see {work / 'job.log'}")
        if kill_at and now >= kill_at[0]:
            kill_at.pop(0)
            job.kill()
            job.wait()
            job, killed, workers_seen = start_job(), killed + 1, False
        if now >= next_restart:
            cluster.terminate(node)
            cluster.restart(node)
            node, restarts, next_restart = node % len(cluster.nodes) + 1, restarts + 1, now + restart_every_s
        time.sleep(1)
    memory.take(duration / 60, job.pid, {n.node_id: n.pid for n in cluster.nodes}, state)
    producer.halt.set()
    producer.join()
    if producer.failures:
        raise RuntimeError(f"the producer failed: {producer.failures[:3]}")
    tally = tally_sink(bootstrap, src, bootstrap, sink, partitions, producer.produced)
    job.send_signal(signal.SIGTERM)
    job.wait(300)
    watcher.halt.set()
    watcher.join()
    log.close()
    lags = sorted(watcher.lags_ms) or [0]
    over = max((o - live for m, o, live in memory.objects if m >= window_start(duration / 60)), default=0)
    memory.plot(work / "memory.png", f"kcompact soak: {minutes:g} minutes at {rate} records/s, {partitions} partitions")
    return SoakResult(tally.records_in, tally.sink_records, tally.lost, tally.duplicated,
                      [v.line() for v in tally.verdicts], tally.verified, memory, memory.growth(duration / 60),
                      over, statistics.median(lags) / 1000, lags[min(len(lags) - 1, int(len(lags) * 0.99))] / 1000,
                      restarts, killed)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=20)
    parser.add_argument("--rate", type=int, default=400, help="records a second")
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--keys", type=int, default=2000)
    parser.add_argument("--restart-every-s", type=float, default=240)
    parser.add_argument("--kills", type=int, default=2)
    parser.add_argument("--sample-every-s", type=float, default=60, help="how often memory is sampled")
    parser.add_argument("--out", type=Path, default=None, help="where memory.csv, memory.png and job.log go")
    parser.add_argument("--report", type=Path, default=None, metavar="DIR",
                        help="report on an earlier run's DIR/memory.csv again (and plot it), without running")
    args = parser.parse_args()
    if args.report:
        memory = MemoryLog.read(args.report / "memory.csv")
        minutes = max(s.minute for s in memory.samples)
        memory.plot(args.report / "memory.png", f"kcompact soak: {minutes:.0f} minutes")
        print(f"memory over minutes {window_start(minutes):.0f}-{minutes:.0f} (limit {GROWTH_LIMIT:.0%}):")
        for name, g in sorted(memory.growth(minutes).items(), key=lambda kv: -kv[1].trend):
            print(f"  {name}: {g.trend:+.1%} (samples within {g.spread:.0%} of each other)")
        return
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
    with start_local_cluster() as broker:
        result = soak(broker, args.minutes, args.rate, args.partitions, args.keys, args.restart_every_s, args.kills,
                      args.out, args.sample_every_s)
    print(f"soak: {args.minutes:g} minutes at {args.rate} records/s on a 3-node cluster")
    for line in result.lines():
        print(f"  {line}")


if __name__ == "__main__":
    main()
