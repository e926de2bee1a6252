"""The whole pipeline, measured against the read limit, a bare mirror and MirrorMaker 2 on the same broker in
the same run.

    python bench/bench_pipeline.py throughput --shape all [--rounds 2]
    python bench/bench_pipeline.py throughput [--sizes 1000000,10000000 --keys 100000 --partitions 4]
    python bench/bench_pipeline.py delete-latency [--tombstones 20 --max-lag-ms 10000]
    python bench/bench_pipeline.py erase-audit [--records 1000000 --tombstone-every 100 --rounds 2]

throughput: `kcompact run --once` semantics (ingest, roll, clean, emit) on a topic of a given shape, beside:
the bare consume (one consumer reading every record with the source's fetch settings: the read limit), a
bare confluent-kafka mirror (consume -> produce, no compaction, idempotent producer) and MirrorMaker 2
(Apache Kafka's connect-mirror in dedicated mode, copying only; its jars fetched with Maven from
bench/mirror_maker/pom.xml), with its defaults and tuned (MM2_TUNED). The shapes (SHAPES) are the topics
users compact: --shape runs them in turn and prints one table; --sizes runs today's shape at each size, so
the time per record at 1M and at 10M shows how the cost grows. MirrorMaker's start-up is excluded by timing
it from the first record in its target topic to the last (its target's end offsets, polled). Spark start-up
is excluded: a first run of the job on a topic of its own (--warm-up records) starts the Python workers and
compiles what the JVM and numba compile once per process, as a long-running compactor has long done; its
time is printed too. Each round runs every side, rotating which goes first; each side writes into a topic
made just before it starts (a mirror's topic is deleted after its run, each shape's source after its
rounds). The broker's CPU time during each side is printed: what it spends on the side's own writes and
reads stays in that side's time.
The wan shapes put the sink cluster in another region: a second broker, and a link of 50 ms round trip and
200 Mbit/s each way between the regions (Toxiproxy, bench/wan.py). Each side runs where it does best (Ends):
the pipeline near the source, so only winners cross the link; MirrorMaker 2 near the target, as it is
deployed, its consumer reading across the link. A second table gives each side's bytes across the link (the
proxies' own counts) and its share of the link's bandwidth.
delete-latency: the continuous job with max.compaction.lag.ms as given; time from producing a tombstone
to its arrival in the sink, median and max.
erase-audit: `--once` on one source with 1% tombstones, with the erase audit kept (erase.audit.keys=hash)
and without it (off), alternating which goes first; the ratio of the two times is the audit's cost.
"""

from __future__ import annotations

import argparse
import contextlib
import json
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

from confluent_kafka import Consumer, Producer, TopicPartition

from procs import cpu_over, cpu_s, is_jvm, memory_mib, stop_group, tree
from pipeline_sides import (HOUR, Side, bare_consume, bare_mirror, delete_topic, delete_topics, mirror_maker,
                            new_sink, new_sinks, new_topics, produce, run_job, warm_up_topic)
from streaming.brokers.choice import acquire_broker
from wan import Link, WanSite, wan_site
from streaming.erasure.events import AuditKeys
from streaming.kafka.admin import create_topic, unique_topic_name
from streaming.log.journal import committed_journal
from streaming.spark.session import build_session
from streaming.state.layout import list_log_dirs
from streaming.state.stores import open_state_dir


@dataclass(frozen=True)
class Shape:
    records: int
    keys: int  # record i has key i mod keys: each key's last record is among the last ``keys``
    partitions: int = 4  # of each topic
    value_bytes: int = 100
    topics: int = 1
    hot_share: float = 0.0  # of the records, on the first tenth of the topics (pipeline_sides.produce)
    wan: bool = False  # the sink cluster in another region, across WAN_LINK (bench/wan.py)


WAN_LINK = Link(rtt_ms=50, mbit_s=200)
SHAPES = {
    "small-keys": Shape(10_000_000, 100_000),  # many updates of few keys
    "distinct": Shape(1_000_000, 1_000_000),  # every key once: a first load, a snapshot
    "entities": Shape(10_000_000, 1_000_000),  # an entity table: a million keys updated ten times
    "big-values": Shape(1_000_000, 100_000, value_bytes=1024),
    "wide": Shape(10_000_000, 100_000, partitions=64),
    # a whole cluster: 400 topics of 5 partitions, 90% of the records on 40 of them; beside it the same records
    # on one topic of 4 partitions, for what the partitions themselves cost
    "many-topics": Shape(2_000_000, 200_000, partitions=5, topics=400, hot_share=0.9),
    "many-topics-base": Shape(2_000_000, 200_000),
    # a DR mirror across regions: a compacted topic of many updates a key, then every key once (what the
    # link costs when compaction removes nothing)
    "wan": Shape(4_000_000, 200_000, wan=True),
    "wan-distinct": Shape(1_000_000, 1_000_000, wan=True),
}
SIDES = ("pipeline", "pipeline-plain", "consume", "mirror", "mm2", "mm2-tuned")  # plain: --kafka-native off
SHAPE_SIDES = "pipeline,consume,mm2-tuned"


@dataclass(frozen=True)
class Ends:
    """Where each side's clients connect. On one broker, all there. Across a WAN, each side runs where it
    does best: the pipeline near the source, so that only the winners cross the link (its reads are many,
    its writes few); MirrorMaker 2 near the target, where it is deployed (its consumer across the link, its
    producer local); the bare consume across the link too, as the read limit MirrorMaker 2 has there."""

    pipeline_source: str
    pipeline_sink: str
    mirror_source: str
    mirror_sink: str
    pids: tuple[int | None, ...]  # the brokers, whose CPU each side is charged with
    site: WanSite | None = None

    @classmethod
    def one_broker(cls, broker) -> "Ends":
        bs = broker.bootstrap_servers
        return cls(bs, bs, bs, bs, (broker.pid,))

    @classmethod
    def across(cls, site: WanSite) -> "Ends":
        near_source, near_sink = site.source.server.direct_bootstrap_servers, site.sink.server.direct_bootstrap_servers
        far_source, far_sink = site.source.bootstrap_servers, site.sink.bootstrap_servers  # through the link's proxies
        return cls(near_source, far_sink, far_source, near_sink, (site.source.pid, site.sink.pid), site)

    def link_bytes(self) -> int:
        return self.site.bytes_across() if self.site else 0

    def broker_cpu(self) -> float:
        return sum(cpu_s(pid) for pid in self.pids)


def _measure(spark, ends: Ends, args: argparse.Namespace, name: str, shape: Shape, sides: list[str],
             work: str) -> dict[str, list[Side]]:
    bs = ends.pipeline_source  # topics are made and filled from near the source
    sources = new_topics(bs, "bench-src", shape.topics, shape.partitions)
    source = sources[0] if shape.topics == 1 else sources
    t = time.perf_counter()
    produce(bs, source, shape.records, shape.keys, shape.partitions, int(time.time() * 1000) - 2 * HOUR,
            value_bytes=shape.value_bytes, hot_share=shape.hot_share)
    print(f"{name}: {shape.records:,} records produced in {time.perf_counter() - t:.1f}s", flush=True)
    out: dict[str, list[Side]] = {n: [] for n in sides}
    for i in range(args.rounds):
        for side in sides[i % len(sides):] + sides[:i % len(sides)]:
            cpu, crossed = ends.broker_cpu(), ends.link_bytes()
            if side in ("pipeline", "pipeline-plain"):
                state_dir = os.path.join(work, f"measured-{name}-{i}")
                sinks = new_sinks(ends.pipeline_sink, shape.partitions, shape.topics)
                seconds, job = run_job(spark, bs, source, sinks[0] if shape.topics == 1 else sinks, state_dir,
                                       sink_bootstrap=ends.pipeline_sink, kafka_native=side == "pipeline")
                expected = (shape.records, min(shape.keys, shape.records))
                assert (job.totals.ingested, job.totals.emitted) == expected, job.totals.to_doc()
                shutil.rmtree(state_dir, ignore_errors=True)
                delete_topics(ends.pipeline_sink, sinks)
            elif side == "consume":
                seconds = bare_consume(ends.mirror_source, source, shape.partitions)
            elif side == "mirror":
                assert shape.topics == 1 and not shape.wan, "the bare mirror copies one topic on one broker"
                mirror = create_topic(bs, unique_topic_name("bench-mirror"), shape.partitions, {"retention.ms": "-1"})
                seconds = bare_mirror(bs, source, mirror, shape.partitions)
                delete_topic(bs, mirror)
            else:
                seconds = mirror_maker(ends.mirror_source, source, shape.partitions, shape.records, work,
                                       f"{name.replace(',', '')}x{i}{side[4:]}", tuned=side == "mm2-tuned",
                                       target_bootstrap=ends.mirror_sink)
            out[side].append(Side(seconds, ends.broker_cpu() - cpu, ends.link_bytes() - crossed))
        print(f"{name} round {i + 1}: " + "  ".join(f"{n} {out[n][-1].seconds:7.2f}s" for n in sides) +
              "  (broker CPU-s " + " / ".join(f"{out[n][-1].broker_cpu:.1f}" for n in sides) + ")", flush=True)
    delete_topics(bs, sources)
    return out


def _shapes(args: argparse.Namespace) -> dict[str, Shape]:
    if args.shape:
        names = list(SHAPES) if args.shape == "all" else args.shape.split(",")
        unknown = [n for n in names if n not in SHAPES]
        if unknown:
            raise SystemExit(f"unknown shape {unknown[0]!r}; one of {', '.join(SHAPES)} or all")
        return {n: SHAPES[n] for n in names}
    return {f"{int(n):,}": Shape(int(n), args.keys, args.partitions, args.value_bytes) for n in args.sizes.split(",")}


def _table(results: dict[str, dict[str, float]], shapes: dict[str, Shape], sides: list[str], rounds: int) -> str:
    """One row per shape: each side's median seconds, the pipeline's speed over MirrorMaker 2 tuned's and
    over the bare consume's (its fraction of the read limit)."""
    head = ["shape", "records", "keys", "partitions", "value B", *(f"{s} s" for s in sides)]
    ratios = [r for r in ("mm2-tuned", "mm2", "mirror", "consume", "pipeline-plain") if r in sides and "pipeline" in sides]
    head += [f"pipeline speed / {r}" for r in ratios]
    lines = [f"medians of {rounds} round(s)", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name, median in results.items():
        shape = shapes[name]
        row = [name, f"{shape.records:,}", f"{shape.keys:,}", str(shape.partitions * shape.topics), str(shape.value_bytes),
               *(f"{median[s]:.2f}" for s in sides), *(f"{median[r] / median['pipeline']:.2f}" for r in ratios)]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def _wan_table(link_results: dict[str, dict[str, tuple[float, float]]], sides: list[str]) -> str:
    """One row per side of each wan shape: its speed, the bytes it sent across the link (both ways, as
    the proxies counted them) and its share of the link's bandwidth over its time."""
    lines = [f"across the WAN link ({WAN_LINK.describe()}), medians:",
             "| shape | side | runs near | s | MB across | MB/s across | share of the link's bandwidth |",
             "|---|---|---|---|---|---|---|"]
    near = {"pipeline": "the source", "pipeline-plain": "the source", "consume": "the target", "mm2-tuned": "the target",
            "mm2": "the target"}
    for name, per_side in link_results.items():
        for side in sides:
            seconds, crossed = per_side[side]
            rate = crossed / seconds
            lines.append(f"| {name} | {side} | {near[side]} | {seconds:.2f} | {crossed / 1e6:,.1f} | "
                         f"{rate / 1e6:.1f} | {rate / WAN_LINK.bytes_per_s:.0%} |")
    return "\n".join(lines)


def bench_throughput(args: argparse.Namespace) -> None:
    work = tempfile.mkdtemp(prefix="kcompact-bench-pipe-")
    shapes = _shapes(args)
    sides = (args.sides or (SHAPE_SIDES if args.shape else ",".join(SIDES))).split(",")
    results: dict[str, dict[str, float]] = {}
    link_results: dict[str, dict[str, tuple[float, float]]] = {}
    try:
        with acquire_broker() as broker, (wan_site(Path(work), WAN_LINK) if any(s.wan for s in shapes.values())
                                          else contextlib.nullcontext()) as wan:
            bs = broker.bootstrap_servers
            spark = build_session("kcompact-bench")
            warm_s = run_job(spark, bs, warm_up_topic(bs, args.warm_up, 4), new_sink(bs, 4),
                             os.path.join(work, "warm-up"))[0]
            for name, shape in shapes.items():
                sides_of = _measure(spark, Ends.across(wan) if shape.wan else Ends.one_broker(broker), args, name,
                                    shape, sides, work)
                results[name] = {n: statistics.median(s.seconds for s in sides_of[n]) for n in sides}
                if shape.wan:
                    link_results[name] = {n: (results[name][n], statistics.median(s.link_bytes for s in sides_of[n]))
                                          for n in sides}
            spark.stop()
        print(f"(warm-up run on {args.warm_up:,} records of another topic: {warm_s:.1f}s)")
        print(_table(results, shapes, sides, args.rounds))
        if link_results:
            print(_wan_table(link_results, sides))
        if not args.shape and len(shapes) > 1:
            (small, s1), (large, s2) = list(shapes.items())[0], list(shapes.items())[-1]
            for side in sides:
                growth = (results[large][side] / s2.records) / (results[small][side] / s1.records)
                print(f"{side}: time per record at {large} / at {small} = {growth:.3f} (flat = 1.0)")
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
            run_job(spark, bs, warm_up_topic(bs, args.warm_up, args.partitions), new_sink(bs, args.partitions),
                    os.path.join(work, "warm-up"))
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


def _idle_side(bs: str, work: str, topics: int, partitions: int, seconds: float) -> dict[str, float]:
    """A continuous `kcompact run` over topics with a few records per partition, all emitted, then idle: what
    ``seconds`` of its idle triggers cost, from its own metrics (stages) and /proc (CPU, memory)."""
    names = new_topics(bs, "bench-idle", topics, partitions)
    prefix = names[0].rsplit("-", 1)[0]
    produce(bs, names, 4 * topics * partitions, 2 * topics * partitions, partitions,
            int(time.time() * 1000) - 2 * HOUR)
    state = os.path.join(work, f"idle-{topics}x{partitions}")
    run = [sys.executable, "-m", "streaming", "run", "--bootstrap-servers", bs, "--source-topic-pattern",
           f"{prefix}-[0-9]+", "--sink-topic-template", "{topic}.s", "--state-dir", state, "--config",
           "max.compaction.lag.ms=1000"]
    with open(state + ".log", "w") as log:
        job = subprocess.Popen([*run, "--trigger-interval", "1"], stdout=log, stderr=subprocess.STDOUT,
                               start_new_session=True)
    try:
        def counters() -> dict:
            try:
                with open(os.path.join(state, "metrics.json")) as f:
                    return json.load(f)["job"]
            except (OSError, ValueError, KeyError):
                return {}
        deadline = time.monotonic() + 900
        while counters().get("records-emitted", 0) < 2 * topics * partitions:
            assert job.poll() is None and time.monotonic() < deadline, Path(state + ".log").read_text()[-3000:]
            time.sleep(1)
        time.sleep(5)  # the stages that follow the last emission
        before, t0 = counters(), time.monotonic()
        cpu = cpu_over(job.pid, seconds)
        after, t1 = counters(), time.monotonic()
        procs = tree(job.pid)
        driver = sum(memory_mib(p, "Pss") for p in procs if p == job.pid or is_jvm(p))
        workers = sum(memory_mib(p, "Pss") for p in procs) - driver
        stop_group(job, 120)
        text = Path(state + ".log").read_text()
        start_up = [line for line in text[:text.index("starting Spark")].splitlines() if line.strip()]
        t = time.perf_counter()  # the same job from cron: nothing new, nothing due
        once = subprocess.run([*run, "--once"], capture_output=True, text=True, timeout=600)
        once_s = time.perf_counter() - t
        assert once.returncode == 0 and "ending without starting Spark" in once.stderr, once.stderr[-3000:]
    finally:
        if job.poll() is None:
            stop_group(job, 120)
        delete_topics(bs, names)
    stages = after["stages"] - before["stages"]
    return {"partitions": topics * partitions, "trigger s": (t1 - t0) / stages,
            "CPU ms per trigger": 1000 * cpu / stages,
            "CPU ms per idle partition per trigger": 1000 * cpu / stages / (topics * partitions),
            "tasks per trigger": (after["stage-tasks"] - before["stage-tasks"]) / stages,
            "driver MiB": driver, "workers MiB": workers, "no-op --once s": once_s,
            "start-up lines": len(start_up)}


def bench_idle(args: argparse.Namespace) -> None:
    """A continuous run over idle partitions: 4 of them and a whole cluster's, side by side on one broker."""
    work = tempfile.mkdtemp(prefix="kcompact-bench-idle-")
    try:
        with acquire_broker() as broker:
            rows = [_idle_side(broker.bootstrap_servers, work, 1, 4, args.seconds),
                    _idle_side(broker.bootstrap_servers, work, args.topics, args.partitions, args.seconds)]
        head = list(rows[0])
        print("| " + " | ".join(head) + " |\n|" + "---|" * len(head))
        for row in rows:
            print("| " + " | ".join(f"{row[h]:,.0f}" if h in ("partitions", "start-up lines") else f"{row[h]:.2f}"
                                    for h in head) + " |")
        for h in ("driver MiB", "workers MiB", "no-op --once s"):
            print(f"{h} at {rows[1]['partitions']:,} partitions / at 4: {rows[1][h] / rows[0][h]:.2f}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    logging.getLogger("py4j").setLevel(logging.WARNING)
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="what", required=True)
    p = sub.add_parser("throughput")
    p.add_argument("--shape", default=None, help=f"comma-separated shapes, measured in turn ({', '.join(SHAPES)}), "
                                                   f"or all; without it, --sizes of today's shape")
    p.add_argument("--sides", default=None, help=f"comma-separated sides of {', '.join(SIDES)} (default: "
                                                   f"{SHAPE_SIDES} with --shape, all with --sizes)")
    p.add_argument("--sizes", default="1000000,10000000", help="comma-separated record counts, measured in turn")
    p.add_argument("--keys", type=int, default=100_000)
    p.add_argument("--partitions", type=int, default=4)
    p.add_argument("--value-bytes", type=int, default=100)
    p.add_argument("--warm-up", type=int, default=200_000, help="records of the warm-up run")
    p.add_argument("--rounds", type=int, default=1, help="rounds of every side per shape, rotating which goes first")
    p.set_defaults(func=bench_throughput)
    p = sub.add_parser("idle")
    p.add_argument("--topics", type=int, default=400)
    p.add_argument("--partitions", type=int, default=5)
    p.add_argument("--seconds", type=float, default=60, help="idle time measured on each side")
    p.set_defaults(func=bench_idle)
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
