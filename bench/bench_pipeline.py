"""The whole pipeline, measured against a bare mirror and MirrorMaker 2 on the same broker in the same run.

    python bench/bench_pipeline.py throughput [--sizes 1000000,10000000 --keys 100000 --partitions 4 --rounds 1]
    python bench/bench_pipeline.py delete-latency [--tombstones 20 --max-lag-ms 10000]
    python bench/bench_pipeline.py erase-audit [--records 1000000 --tombstone-every 100 --rounds 2]

throughput: `kcompact run --once` semantics (ingest, roll, clean, emit) on N records vs. a bare
confluent-kafka mirror (consume -> produce, no compaction, idempotent producer) and vs. MirrorMaker 2
(Apache Kafka's connect-mirror in dedicated mode, copying only; its jars fetched with Maven from
bench/mirror_maker/pom.xml), with its defaults and tuned (MM2_TUNED), for each size in turn, so the time per
record at 1M and at 10M shows how the cost grows. MirrorMaker's start-up is excluded by timing it from the
first record in its target topic to the last (its target's end offsets, polled). Spark start-up is excluded: a first run of
the job on a topic of its own (--warm-up records) starts the Python workers and compiles what the JVM and
numba compile once per process, as a long-running compactor has long done; its time is printed too. Each
round runs both sides, alternating which goes first; each side writes into a topic made just before it
starts (a mirror's topic is deleted after its run, each size's source after its rounds). The broker's CPU
time during each side is printed: what it spends on the side's own writes and reads stays in that side's time.
delete-latency: the continuous job with max.compaction.lag.ms as given; time from producing a tombstone
to its arrival in the sink, median and max.
erase-audit: `--once` on one source with 1% tombstones, with the erase audit kept (erase.audit.keys=hash)
and without it (off), alternating which goes first; the ratio of the two times is the audit's cost.
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from streaming.brokers.choice import acquire_broker
from streaming.brokers.local.jars import ensure_kafka_jars
from streaming.cleaner import CompactionConfig, JobSettings
from streaming.erasure.events import AuditKeys
from streaming.kafka.admin import Cluster
from streaming.kafka.client_log import with_client_log  # the benchmark's own clients: no librdkafka lines on stderr
from streaming.job.spec import JobMapping, JobSpec, TopicPlan
from streaming.job.options import RunOptions
from streaming.job.runner import CompactorJob
from streaming.spark.session import build_session
from streaming.spark.driver import SparkEngine
from streaming.subscription import Subscribe
from streaming.kafka.admin import create_topic, unique_topic_name
from streaming.log.journal import committed_journal
from streaming.state.layout import list_log_dirs
from streaming.state.stores import open_state_dir

HOUR = 3_600_000
MM2_POM = Path(__file__).with_name("mirror_maker") / "pom.xml"
# The settings a user tunes MirrorMaker 2's throughput with first (the issue that set the 2x target measured
# these): bigger producer batches, lingering for them, and more records per consumer poll.
MM2_TUNED = {"producer.linger.ms": "20", "producer.batch.size": "1000000", "consumer.max.poll.records": "5000"}


def cpu_s(pid: int | None) -> float:
    """CPU seconds a process has used so far (0 for one we cannot see: a broker we did not start)."""
    if pid is None:
        return 0.0
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def produce(bootstrap: str, topic: str, records: int, keys: int, partitions: int, ts: int,
            tombstone_every: int = 0) -> None:
    producer = Producer(with_client_log({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1_000_000,
                                         "queue.buffering.max.messages": 2_000_000}))
    value = os.urandom(100)
    for i in range(records):
        while True:
            try:
                producer.produce(topic, key=b"key-%012d" % (i % keys), partition=i % partitions, timestamp=ts + i,
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


def mirror_maker(bootstrap: str, source: str, partitions: int, records: int, work: str, run: str,
                 tuned: bool) -> float:
    """MirrorMaker 2 copying ``source`` to another topic of the same broker (cluster aliases of this run's
    own, so no run resumes another's offsets); seconds from its first record in the target to its last."""
    jars = ensure_kafka_jars(MM2_POM)
    src, dst = f"s{run}", f"d{run}"
    props = {"clusters": f"{src}, {dst}", f"{src}.bootstrap.servers": bootstrap, f"{dst}.bootstrap.servers": bootstrap,
             f"{src}->{dst}.enabled": "true", f"{src}->{dst}.topics": source, f"{dst}->{src}.enabled": "false",
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
    target = f"{src}.{source}"
    watcher = Consumer(with_client_log({"bootstrap.servers": bootstrap, "group.id": f"watch-{run}"}))
    log4j = os.path.join(work, "mm2-log4j2.properties")
    with open(log4j, "w") as f:  # INFO to its log file, so a failed run says why
        f.write("rootLogger.level = INFO\nrootLogger.appenderRef.out.ref = out\nappender.out.type = Console\n"
                "appender.out.name = out\nappender.out.layout.type = PatternLayout\n"
                "appender.out.layout.pattern = %d %p %c{1}: %m%n\n")
    with open(os.path.join(work, f"mm2-{run}.log"), "w") as out:
        proc = subprocess.Popen(["java", "-Xmx1g", f"-Dlog4j2.configurationFile={log4j}", "-cp", jars.classpath,
                                 "org.apache.kafka.connect.mirror.MirrorMaker", path],
                                stdout=out, stderr=subprocess.STDOUT)
    try:
        first = last = None
        deadline = time.monotonic() + 600
        while last is None:
            if proc.poll() is not None or time.monotonic() > deadline:
                with open(out.name) as f:
                    tail = "\n".join(line for line in f.read().splitlines() if " ERROR " in line or " WARN " in line)[-3000:]
                raise RuntimeError(f"MirrorMaker 2 ended or stalled (rc {proc.returncode}): {tail}")
            time.sleep(0.02)
            try:
                copied = sum(watcher.get_watermark_offsets(TopicPartition(target, p), timeout=10, cached=False)[1]
                             for p in range(partitions))
            except KafkaException:  # the target is not made yet, or its leaders are not elected yet
                continue
            now = time.perf_counter()
            if copied and first is None:
                first = now
            if copied >= records:
                last = now
    finally:
        watcher.close()
        proc.terminate()
        proc.wait(60)
    admin = AdminClient(with_client_log({"bootstrap.servers": bootstrap}))  # its target and internal topics go: the next side
    made = [t for t in admin.list_topics(timeout=10).topics if t.startswith(f"{src}.") or f".{dst}." in t]
    for future in admin.delete_topics(made).values():  # starts on a broker with nothing of this run left
        future.result(60)
    return last - first


def warm_up_topic(bootstrap: str, args: argparse.Namespace) -> str:
    topic = create_topic(bootstrap, unique_topic_name("bench-warm"), args.partitions, {"retention.ms": "-1"})
    produce(bootstrap, topic, args.warm_up, args.warm_up // 10, args.partitions, int(time.time() * 1000) - 2 * HOUR)
    return topic


def delete_topic(bootstrap: str, topic: str) -> None:
    admin = AdminClient(with_client_log({"bootstrap.servers": bootstrap}))  # held until the deletion is done
    for future in admin.delete_topics([topic]).values():
        future.result(60)


def new_sink(bootstrap: str, partitions: int) -> str:
    """A sink as `kcompact run` makes it, but not compacted by the broker."""
    sink = unique_topic_name("bench-sink")
    Cluster("sink", bootstrap).ensure_topic(sink, partitions, {"cleanup.policy": "delete", "retention.ms": "-1"}, "sink")
    return sink


def run_job(spark, bootstrap: str, source: str, sink: str, state_dir: str,
            audit: AuditKeys = AuditKeys.HASH) -> tuple[float, CompactorJob]:
    mapping = JobMapping(bootstrap, Subscribe((source,)), bootstrap, sink)
    partitions = Cluster("source", bootstrap).partition_count(source)
    settings = JobSettings(erase_audit_keys=audit)
    plan = TopicPlan(source, sink, settings.over(CompactionConfig(max_compaction_lag_ms=60_000)), partitions)
    spec = JobSpec(mapping, state_dir, {source: plan}, settings=settings)
    job = CompactorJob(SparkEngine(spark), spec, RunOptions(once=True))
    t = time.perf_counter()
    assert job.run() == 0
    return time.perf_counter() - t, job


@dataclass
class Side:
    seconds: float
    broker_cpu: float


SIDES = ("pipeline", "mirror", "mm2", "mm2-tuned")


def _measure_size(spark, broker, args: argparse.Namespace, records: int, work: str) -> dict[str, list[Side]]:
    bs = broker.bootstrap_servers
    source = create_topic(bs, unique_topic_name("bench-src"), args.partitions, {"retention.ms": "-1"})
    t = time.perf_counter()
    produce(bs, source, records, args.keys, args.partitions, int(time.time() * 1000) - 2 * HOUR)
    print(f"{records:,} records produced in {time.perf_counter() - t:.1f}s", flush=True)
    out: dict[str, list[Side]] = {n: [] for n in SIDES}
    for i in range(args.rounds):
        for name in SIDES[i % 2:] + SIDES[:i % 2]:
            cpu = cpu_s(broker.pid)
            if name == "pipeline":
                seconds, job = run_job(spark, bs, source, new_sink(bs, args.partitions),
                                       os.path.join(work, f"measured-{records}-{i}"))
                expected = (records, min(args.keys, records))
                assert (job.totals.ingested, job.totals.emitted) == expected, job.totals.to_doc()
                shutil.rmtree(os.path.join(work, f"measured-{records}-{i}"), ignore_errors=True)
            elif name == "mirror":
                mirror = create_topic(bs, unique_topic_name("bench-mirror"), args.partitions, {"retention.ms": "-1"})
                seconds = bare_mirror(bs, source, mirror, args.partitions)
                delete_topic(bs, mirror)
            else:
                seconds = mirror_maker(bs, source, args.partitions, records, work, f"{records}x{i}{name[4:]}",
                                       tuned=name == "mm2-tuned")
            out[name].append(Side(seconds, cpu_s(broker.pid) - cpu))
        p = out["pipeline"][-1]
        print(f"{records:>11,} round {i + 1}: " + "  ".join(f"{n} {out[n][-1].seconds:7.2f}s" for n in SIDES) +
              "  pipeline speed / " + ", ".join(f"{n} {out[n][-1].seconds / p.seconds:.3f}" for n in SIDES[1:]) +
              "  (broker CPU-s " + " / ".join(f"{out[n][-1].broker_cpu:.1f}" for n in SIDES) + ")", flush=True)
    delete_topic(bs, source)
    return out


def bench_throughput(args: argparse.Namespace) -> None:
    work = tempfile.mkdtemp(prefix="kcompact-bench-pipe-")
    sizes = [int(n) for n in args.sizes.split(",")]
    results: dict[int, dict[str, float]] = {}
    try:
        with acquire_broker() as broker:
            bs = broker.bootstrap_servers
            spark = build_session("kcompact-bench")
            warm_s = run_job(spark, bs, warm_up_topic(bs, args), new_sink(bs, args.partitions),
                             os.path.join(work, "warm-up"))[0]
            for records in sizes:
                sides = _measure_size(spark, broker, args, records, work)
                results[records] = {n: statistics.median(s.seconds for s in sides[n]) for n in SIDES}
            spark.stop()
        print(f"(warm-up run on {args.warm_up:,} records of another topic: {warm_s:.1f}s)")
        for records, median in results.items():
            p = median["pipeline"]
            print(f"{records:>11,} records, median of {args.rounds}: " + ", ".join(
                f"{n} {records / median[n]:,.0f} records/s ({1e6 * median[n] / records:.2f} us/record)" for n in SIDES))
            print(f"{records:>11,} records: pipeline speed / bare mirror = {median['mirror'] / p:.3f}, / MirrorMaker 2 "
                  f"= {median['mm2'] / p:.3f}, / MirrorMaker 2 tuned = {median['mm2-tuned'] / p:.3f} (targets >= 2.0)")
        if len(sizes) > 1:
            small, large = sizes[0], sizes[-1]
            for name in SIDES:
                growth = (results[large][name] / large) / (results[small][name] / small)
                print(f"{name}: time per record at {large:,} / at {small:,} = {growth:.3f} (flat = 1.0)")
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _journaled(state_dir: str) -> int:
    """Events in the erase audit of a state dir (0 when it keeps none)."""
    state = open_state_dir(state_dir)
    return sum(len(committed_journal(state.storage, d.directory)) for d in list_log_dirs(state))


def bench_erase_audit(args: argparse.Namespace) -> None:
    work = tempfile.mkdtemp(prefix="kcompact-bench-audit-")
    sides = {AuditKeys.HASH: [], AuditKeys.OFF: []}
    try:
        with acquire_broker() as broker:
            bs = broker.bootstrap_servers
            spark = build_session("kcompact-bench")
            run_job(spark, bs, warm_up_topic(bs, args), new_sink(bs, args.partitions), os.path.join(work, "warm-up"))
            source = create_topic(bs, unique_topic_name("bench-src"), args.partitions, {"retention.ms": "-1"})
            produce(bs, source, args.records, args.keys, args.partitions, int(time.time() * 1000) - 2 * HOUR,
                    args.tombstone_every)
            order = list(sides)
            for i in range(args.rounds):
                for audit in order[i % 2:] + order[:i % 2]:
                    state_dir = os.path.join(work, f"{audit.value}-{i}")
                    seconds, job = run_job(spark, bs, source, new_sink(bs, args.partitions), state_dir, audit)
                    assert job.totals.ingested == args.records, job.totals.to_doc()
                    events = _journaled(state_dir)
                    sides[audit].append(seconds)
                    print(f"round {i + 1}: erase.audit.keys={audit.value:<4} {seconds:7.2f}s "
                          f"({args.records / seconds:,.0f} records/s), {events:,} audit events", flush=True)
                    shutil.rmtree(state_dir, ignore_errors=True)
            spark.stop()
        on, off = (statistics.median(sides[a]) for a in (AuditKeys.HASH, AuditKeys.OFF))
        print(f"{args.records:,} records, 1 in {args.tombstone_every} a tombstone, median of {args.rounds}: "
              f"audit kept {on:.2f}s, no audit {off:.2f}s; time with / without = {on / off:.3f}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


def bench_delete_latency(args: argparse.Namespace) -> None:
    work = tempfile.mkdtemp(prefix="kcompact-bench-del-")
    proc = None
    try:
        with acquire_broker() as broker:
            bs = broker.bootstrap_servers
            source = create_topic(bs, unique_topic_name("bench-del"), 1, {"retention.ms": "-1"})
            sink = unique_topic_name("bench-del-sink")
            producer = Producer({"bootstrap.servers": bs, "enable.idempotence": True})
            for i in range(args.tombstones):
                producer.produce(source, key=b"k%d" % i, value=b"alive", partition=0)
            producer.flush(30)
            job_log = open(args.job_log, "w") if args.job_log else subprocess.DEVNULL  # noqa: SIM115 (the job's, to its end)
            proc = subprocess.Popen([sys.executable, "-m", "streaming", "--log-level", "INFO", "run",
                                     "--bootstrap-servers", bs, "--source-topic", source, "--sink-topic", sink,
                                     "--state-dir", work, "--trigger-interval", "1",
                                     "--config", f"max.compaction.lag.ms={args.max_lag_ms}"],
                                    stdout=subprocess.DEVNULL, stderr=job_log)
            consumer = Consumer({"bootstrap.servers": bs, "group.id": f"lat-{sink}", "isolation.level": "read_committed",
                                 "auto.offset.reset": "earliest", "enable.auto.commit": False})
            while sink not in consumer.list_topics(timeout=10).topics:
                time.sleep(0.5)
            consumer.assign([TopicPartition(sink, 0, 0)])
            alive = 0
            while alive < args.tombstones:  # the first values reach the sink: the job is warm
                alive += sum(1 for m in consumer.consume(100, timeout=1) if m.error() is None)
            sent_at: dict[bytes, float] = {}
            arrived_at: dict[bytes, float] = {}
            done = threading.Event()

            def watch_sink() -> None:  # arrival times are taken as records arrive, while producing goes on
                while not done.is_set():
                    for m in consumer.consume(100, timeout=0.1):
                        if m.error() is None and m.value() is None:
                            arrived_at.setdefault(m.key(), time.monotonic())

            watcher = threading.Thread(target=watch_sink, daemon=True)
            watcher.start()
            for i in range(args.tombstones):
                sent_at[b"k%d" % i] = time.monotonic()
                producer.produce(source, key=b"k%d" % i, value=None, partition=0)
                producer.flush(10)
                time.sleep(args.spacing)
            deadline = time.monotonic() + 10 * args.max_lag_ms / 1000 + 60
            while len(arrived_at) < args.tombstones and time.monotonic() < deadline:
                time.sleep(0.2)
            done.set()
            watcher.join()
            delays = {k: arrived_at[k] - sent_at[k] for k in arrived_at if k in sent_at}
            consumer.close()
        d = sorted(delays.values())
        print(f"max.compaction.lag.ms={args.max_lag_ms}, trigger 1 s, {args.tombstones} tombstones "
              f"{args.spacing}s apart: arrived {len(d)}")
        print(f"tombstone -> sink: median {statistics.median(d):.2f}s  max {max(d):.2f}s  min {min(d):.2f}s")
    finally:
        if proc is not None:
            proc.send_signal(signal.SIGTERM)
            proc.wait(60)
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    logging.getLogger("py4j").setLevel(logging.WARNING)
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="what", required=True)
    p = sub.add_parser("throughput")
    p.add_argument("--sizes", default="1000000,10000000", help="comma-separated record counts, measured in turn")
    p.add_argument("--keys", type=int, default=100_000)
    p.add_argument("--partitions", type=int, default=4)
    p.add_argument("--warm-up", type=int, default=200_000, help="records of the warm-up run")
    p.add_argument("--rounds", type=int, default=1, help="rounds of both sides per size, alternating which goes first")
    p.set_defaults(func=bench_throughput)
    p = sub.add_parser("delete-latency")
    p.add_argument("--tombstones", type=int, default=20)
    p.add_argument("--max-lag-ms", type=int, default=10_000)
    p.add_argument("--spacing", type=float, default=1.0, help="seconds between tombstones")
    p.add_argument("--job-log", default=None, help="write the compactor's log here")
    p.set_defaults(func=bench_delete_latency)
    p = sub.add_parser("erase-audit")
    p.add_argument("--records", type=int, default=1_000_000)
    p.add_argument("--keys", type=int, default=100_000)
    p.add_argument("--partitions", type=int, default=4)
    p.add_argument("--tombstone-every", type=int, default=100, help="1 record in this many is a tombstone")
    p.add_argument("--warm-up", type=int, default=200_000, help="records of the warm-up run")
    p.add_argument("--rounds", type=int, default=2, help="runs of each side, alternating which goes first")
    p.set_defaults(func=bench_erase_audit)
    args = ap.parse_args()
    args.func(args)


if __name__ == "__main__":
    main()
