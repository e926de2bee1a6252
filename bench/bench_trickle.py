"""A whole cluster trickling: hundreds of topics, each partition receiving a few records a second, mirrored
continuously by the job and by MirrorMaker 2 tuned, one after the other on the same broker.

    python bench/bench_trickle.py [--topics 400 --partitions 5 --rate 10000 --warm-up 60 --window 120]

Each side gets source topics of its own (compacted, as a DR copy's are) and a producer writing ``--rate``
records a second spread evenly over every partition, each record a new key, so that every record reaches the
sink on both sides. The job runs as `kcompact run` over a topic pattern with its defaults, but for the topic
settings of ``--config`` (by default max.compaction.lag.ms=1: each record is cleaned and emitted at the next
trigger, which a DR copy that wants its records at once sets); MirrorMaker 2 runs in dedicated mode with the
settings users tune first (pipeline_sides.MM2_TUNED). After the warm-up, over the window: the CPU-seconds of
the side's processes (sampled, as Spark retires and starts Python workers) and of the broker, and for each
record produced in the window its latency, from its timestamp (set as it is produced) to its arrival in a
read_committed consumer of the sink topics. A record not arrived ``--grace`` seconds after the window counts
as later than any that arrived.
"""

from __future__ import annotations

import argparse
import array
import contextlib
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from pipeline_sides import delete_topics, new_topics, running_mirror_maker
from procs import cpu_over, cpu_s, stop_group
from streaming.brokers.choice import acquire_broker
from streaming.kafka.client_log import with_client_log

SIDES = ("pipeline", "mm2-tuned")


class _Worker:
    """A thread whose failure is raised again where it is finished, so that no result is made from a producer
    or a reader that died mid-way."""

    def __init__(self) -> None:
        self.stop = threading.Event()
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._guarded, daemon=True)
        self.thread.start()

    def _guarded(self) -> None:
        try:
            self._run()
        except BaseException as exc:  # noqa: BLE001 (raised again by finish, in the bench's own thread)
            self.error = exc

    def _run(self) -> None:
        raise NotImplementedError

    def finish(self) -> None:
        """Stops the thread, waits for it, and raises what it failed with (once)."""
        self.stop.set()
        self.thread.join()
        error, self.error = self.error, None
        if error is not None:
            raise RuntimeError(f"{type(self).__name__} failed") from error


class Trickle(_Worker):
    """The producer: record n to topic n mod topics, partition (n div topics) mod partitions, at ``rate`` a
    second, each stamped with the time it is produced; the stamps are kept to count a window's records. A
    producer more than a second behind its rate (the cores are busy) drops the backlog instead of sending it in
    a burst, so the offered load stays steady; the table gives the rate reached."""

    def __init__(self, bootstrap: str, topics: list[str], partitions: int, rate: int) -> None:
        self.topics, self.partitions, self.rate = topics, partitions, rate
        self.producer = Producer(with_client_log({"bootstrap.servers": bootstrap, "linger.ms": 5,
                                                  "enable.idempotence": True}))
        self.stamps = array.array("q")
        self.failed = 0  # deliveries the broker refused for good
        super().__init__()

    def _delivered(self, err, _msg) -> None:
        if err is not None:
            self.failed += 1

    def _run(self) -> None:
        value, start, sent, skipped = os.urandom(100), time.monotonic(), 0, 0
        while not self.stop.is_set():
            due = int((time.monotonic() - start) * self.rate) - skipped
            if due - sent > self.rate:
                skipped += due - sent
                due = sent
            while sent < due:
                now_ms = int(time.time() * 1000)
                topic = self.topics[sent % len(self.topics)]
                try:
                    self.producer.produce(topic, key=b"key-%012d" % sent, value=value, timestamp=now_ms,
                                          partition=sent // len(self.topics) % self.partitions,
                                          on_delivery=self._delivered)
                except BufferError:
                    self.producer.poll(0.01)
                    continue
                self.stamps.append(now_ms)
                sent += 1
            self.producer.poll(0)
            time.sleep(0.005)
        if self.producer.flush(60) or self.failed:
            raise RuntimeError(f"{self.failed} records not delivered, {len(self.producer)} still queued")

    def produced_in(self, start_ms: int, end_ms: int) -> int:
        """Records stamped within the window (call after finish: the stamps grow while it runs)."""
        return sum(1 for t in self.stamps if start_ms <= t < end_ms)


class SinkWatch(_Worker):
    """A read_committed consumer of every sink partition from its beginning, once the side has made the sink
    topics; each record's arrival time minus its timestamp. Keys are unique, so a record MirrorMaker 2 copies
    twice (it delivers at least once) counts at its first arrival only."""

    def __init__(self, bootstrap: str, sinks: list[str], partitions: int, alive: Callable[[], bool]) -> None:
        self.consumer = Consumer(with_client_log({
            "bootstrap.servers": bootstrap, "group.id": f"trickle-{sinks[0]}", "enable.auto.commit": False,
            "isolation.level": "read_committed", "fetch.wait.max.ms": 50}))
        self.sinks, self.partitions, self.alive = sinks, partitions, alive
        self.arrivals: list[tuple[int, int]] = []  # (timestamp ms, latency ms), in order of arrival
        self.seen: set[bytes] = set()
        super().__init__()

    def _run(self) -> None:
        while not self.stop.is_set():
            made = self.consumer.list_topics(timeout=10).topics
            if all(s in made and len(made[s].partitions) == self.partitions for s in self.sinks):
                break
            if not self.alive():
                raise RuntimeError("the side ended before making its sink topics")
            time.sleep(1)
        self.consumer.assign([TopicPartition(s, p, OFFSET_BEGINNING) for s in self.sinks
                              for p in range(self.partitions)])
        while not self.stop.is_set():
            messages = self.consumer.consume(10_000, timeout=0.1)
            now_ms = int(time.time() * 1000)
            for m in messages:
                if m.error() is None and m.key() not in self.seen:
                    self.seen.add(m.key())
                    ts = m.timestamp()[1]
                    self.arrivals.append((ts, now_ms - ts))
        self.consumer.close()

    def arrived_in(self, start_ms: int, end_ms: int) -> list[int]:
        """The latencies of the records stamped within the window that arrived."""
        return [lat for ts, lat in self.arrivals if start_ms <= ts < end_ms]


@dataclass(frozen=True)
class Result:
    side: str
    produced: int
    latencies_ms: list[int]  # of the window's records that arrived
    side_cpu_s: float
    broker_cpu_s: float
    bench_cpu_s: float  # this process's: the producer and the sink's reader, on the same cores
    window_s: float
    stages: int | None = None  # the job's stages over the window

    def percentile(self, q: float) -> str:
        """The q-th latency over every produced record, those not arrived counting as later than all."""
        if not self.produced:
            return "-"
        rank = int(q * (self.produced - 1))
        lat = sorted(self.latencies_ms)
        return f"{lat[rank] / 1000:.2f}" if rank < len(lat) else "not arrived"


@dataclass(frozen=True)
class Running:
    """A side while it runs: its processes' root, the sink topics it writes, why it ended (its log's last
    lines), and (the job's) its stage count."""

    root: int
    sinks: list[str]
    alive: Callable[[], bool]
    why: Callable[[], str]
    stages: Callable[[], int] | None = None


@contextlib.contextmanager
def _job(args: argparse.Namespace, bs: str, topics: list[str], work: str) -> Iterator[Running]:
    """`kcompact run` over the topics' pattern; its process group stopped at the end (SIGTERM, then SIGKILL),
    its sinks deleted."""
    base, state_dir = topics[0].rsplit("-", 1)[0], os.path.join(work, "job-state")
    log_path = args.job_log or os.path.join(work, "job.log")
    with open(log_path, "w") as out:
        job = subprocess.Popen([sys.executable, "-m", "streaming", "run", "--bootstrap-servers", bs,
                                "--source-topic-pattern", f"{base}-[0-9]+", "--sink-topic-template", "{topic}.s",
                                "--state-dir", state_dir, "--trigger-interval", str(args.trigger_interval),
                                *[a for c in args.config for a in ("--config", c)]],
                               stdout=out, stderr=subprocess.STDOUT, start_new_session=True)

    def stages() -> int:
        try:
            with open(os.path.join(state_dir, "metrics.json")) as f:
                return int(json.load(f)["job"]["stages"])
        except (OSError, ValueError, KeyError):
            return 0

    sinks = [f"{t}.s" for t in topics]
    try:
        yield Running(job.pid, sinks, lambda: job.poll() is None, lambda: Path(log_path).read_text()[-3000:], stages)
    finally:
        stop_group(job, 120)
        made = AdminClient(with_client_log({"bootstrap.servers": bs})).list_topics(timeout=10).topics
        if made_sinks := [s for s in sinks if s in made]:
            delete_topics(bs, made_sinks)
        shutil.rmtree(state_dir, ignore_errors=True)


@contextlib.contextmanager
def _mm2(args: argparse.Namespace, bs: str, topics: list[str], work: str) -> Iterator[Running]:
    """MirrorMaker 2 tuned, with cluster aliases of its own (pipeline_sides.running_mirror_maker)."""
    with running_mirror_maker(bs, topics, work, f"trickle{int(time.time())}", tuned=True) as run:
        yield Running(run.proc.pid, [f"{run.prefix}{t}" for t in topics], lambda: run.proc.poll() is None,
                      lambda: str(run.failure()))


def _measure(args: argparse.Namespace, broker, work: str, side: str) -> Result:
    bs = broker.bootstrap_servers
    topics = new_topics(bs, "bench-trickle", args.topics, args.partitions, compacted=True)
    try:
        with (_job if side == "pipeline" else _mm2)(args, bs, topics, work) as running, \
                contextlib.ExitStack() as threads:
            trickle = Trickle(bs, topics, args.partitions, args.rate)
            threads.callback(trickle.finish)
            watch = SinkWatch(bs, running.sinks, args.partitions, running.alive)
            threads.callback(watch.finish)
            time.sleep(args.warm_up)
            if not running.alive():
                raise RuntimeError(f"{side} ended during the warm-up: {running.why()}")
            stages = running.stages() if running.stages else 0
            broker_cpu, own_cpu, start_ms = cpu_s(broker.pid), cpu_s(os.getpid()), int(time.time() * 1000)
            side_cpu = cpu_over(running.root, args.window)
            end_ms, broker_cpu = int(time.time() * 1000), cpu_s(broker.pid) - broker_cpu
            own_cpu = cpu_s(os.getpid()) - own_cpu
            stages = running.stages() - stages if running.stages else None
            if not running.alive():
                raise RuntimeError(f"{side} ended during the window: {running.why()}")
            trickle.finish()
            produced = trickle.produced_in(start_ms, end_ms)
            deadline = time.monotonic() + args.grace
            while len(watch.arrived_in(start_ms, end_ms)) < produced and time.monotonic() < deadline:
                time.sleep(0.5)
            watch.finish()
            result = Result(side, produced, watch.arrived_in(start_ms, end_ms), side_cpu, broker_cpu, own_cpu,
                            (end_ms - start_ms) / 1000, stages)
    finally:
        delete_topics(bs, topics)
    print(f"{side}: {result.produced:,} records produced in the {result.window_s:.0f} s window, "
          f"{len(result.latencies_ms):,} arrived; CPU-s {result.side_cpu_s:.1f}, broker {result.broker_cpu_s:.1f}"
          + (f"; {result.stages} stages" if result.stages is not None else ""), flush=True)
    return result


def _ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}" if b else "-"  # a broker we did not start shows no CPU


def _table(results: list[Result], args: argparse.Namespace) -> str:
    lines = [f"{args.topics} topics x {args.partitions} partitions, {args.rate:,} records/s offered over every "
             f"partition, {args.window:.0f} s after {args.warm_up:.0f} s of warm-up; the job's trigger "
             f"{args.trigger_interval} s, topic settings {' '.join(args.config) or '(defaults)'}; bench CPU-s: this "
             f"process's (the producer, the sinks' reader, the CPU sampling)",
             "| side | records | records/s | arrived | CPU-s | CPU cores | stages | CPU-s a stage | broker CPU-s | "
             "bench CPU-s | latency p50 s | p99 s | max s |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        # where a stage takes longer than the trigger the next runs as soon as it ends, and with the cores full the
        # job's CPU-s over the window are what the cores leave it: its CPU-s a stage are what follows its work
        stages = "-" if r.stages is None else str(r.stages)
        per_stage = f"{r.side_cpu_s / r.stages:.2f}" if r.stages else "-"
        lines.append(f"| {r.side} | {r.produced:,} | {r.produced / r.window_s:,.0f} | {len(r.latencies_ms):,} | "
                     f"{r.side_cpu_s:.1f} | {r.side_cpu_s / r.window_s:.2f} | {stages} | {per_stage} | "
                     f"{r.broker_cpu_s:.1f} | {r.bench_cpu_s:.1f} | {r.percentile(0.5)} | {r.percentile(0.99)} | "
                     f"{r.percentile(1.0)} |")
    by = {r.side: r for r in results}
    if set(SIDES) <= set(by):
        job, mm2 = by["pipeline"], by["mm2-tuned"]
        per_record = _ratio(job.side_cpu_s / max(1, job.produced), mm2.side_cpu_s / max(1, mm2.produced))
        lines.append(f"pipeline / mm2-tuned: CPU {_ratio(job.side_cpu_s, mm2.side_cpu_s)} ({per_record} a record), "
                     f"broker CPU {_ratio(job.broker_cpu_s, mm2.broker_cpu_s)}; latency p50 {job.percentile(0.5)} s vs "
                     f"{mm2.percentile(0.5)} s, p99 {job.percentile(0.99)} s vs {mm2.percentile(0.99)} s")
    return "\n".join(lines)


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--topics", type=int, default=400)
    ap.add_argument("--partitions", type=int, default=5)
    ap.add_argument("--rate", type=int, default=10_000, help="records a second, over every partition")
    ap.add_argument("--warm-up", type=float, default=60, help="seconds of each side before its window")
    ap.add_argument("--window", type=float, default=120, help="seconds measured")
    ap.add_argument("--grace", type=float, default=60, help="seconds the window's last records may take to arrive")
    ap.add_argument("--trigger-interval", type=float, default=5.0, help="the job's (its default)")
    ap.add_argument("--config", action="append", default=None,
                    help="a topic setting of the job's, key=value (default: max.compaction.lag.ms=1)")
    ap.add_argument("--job-log", default=None, help="keep the job's log (INFO) in this file")
    ap.add_argument("--sides", default=",".join(SIDES), help=f"comma-separated, of {', '.join(SIDES)}")
    args = ap.parse_args()
    args.config = ["max.compaction.lag.ms=1"] if args.config is None else args.config
    sides = args.sides.split(",")
    if unknown := [s for s in sides if s not in SIDES]:
        raise SystemExit(f"unknown side {unknown[0]!r}; one of {', '.join(SIDES)}")
    work = tempfile.mkdtemp(prefix="kcompact-bench-trickle-")
    try:
        with acquire_broker() as broker:
            results = [_measure(args, broker, work, side) for side in sides]
        print(_table(results, args))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
