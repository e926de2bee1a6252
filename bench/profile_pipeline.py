"""Where a shape's `--once` spends its time: wall per stage, CPU per process, the hottest functions per stage.

    python bench/profile_pipeline.py --shape distinct,entities [--rate 100]

For each shape of bench_pipeline.py (after a warm-up run, as there): the topic is produced, the job runs once
without py-spy (its time, to see what sampling costs) and once more into a new sink and state dir under py-spy (--subprocesses, raw stacks without line numbers) attached to this process, so the driver, the
Python workers of both stages and the planning processes are all sampled. Printed per shape:
- wall: start to the first micro-batch, each stage (ingest: the source's read and the append, one Spark
  task per partition; compaction: roll, clean and emit, one task per log), and the end, from the job's
  own DEBUG phase lines;
- CPU seconds per process: Spark's JVM and the broker from /proc, each Python kind from py-spy's samples
  (a sample counts when its thread is not idle);
- per stage, the functions with the most samples of their own (leaf frames) and the package's functions
  with the most samples in all (inclusive).
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field

from bench_pipeline import SHAPES
from procs import cpu_s
from pipeline_sides import HOUR, delete_topic, new_sink, produce, run_job, warm_up_topic
from streaming.brokers.choice import acquire_broker
from streaming.kafka.admin import create_topic, unique_topic_name
from streaming.spark.session import build_session

PY_SPY = os.path.join(os.path.dirname(sys.executable), "py-spy")
PROCESS = re.compile(r'^process (\d+):"')
STAGES = {"compact_partitions": "compaction", "append_partitions": "ingest"}  # a stage's task entry point


@dataclass
class Phases:
    """Times of the job's DEBUG phase lines, in the order they came."""

    lines: list[tuple[float, str]] = field(default_factory=list)

    def handler(self) -> logging.Handler:
        phases = self

        class Collect(logging.Handler):
            def emit(self, record: logging.LogRecord) -> None:
                message = record.getMessage()
                if message.startswith("phase: ") or message.startswith("batch "):
                    phases.lines.append((record.created, message))

        return Collect(logging.DEBUG)

    def walls(self, start: float, end: float) -> dict[str, float]:
        """Seconds per part: before the first batch, ingest (append phases to their batch lines), compaction
        (stage to idle), and the rest."""
        out: Counter[str] = Counter()
        opened: dict[str, float] = {}
        for t, message in self.lines:
            if message.startswith("phase: append batch"):
                opened["ingest"] = t
                out.setdefault("start to the first batch", t - start)
            elif message.startswith("batch ") and "ingest" in opened:
                out["ingest stage"] += t - opened.pop("ingest")
            elif message.startswith("phase: compaction stage"):
                opened["compaction"] = t
            elif message == "phase: idle" and "compaction" in opened:
                out["compaction stage"] += t - opened.pop("compaction")
        out["the rest (between stages, the end)"] = end - start - sum(out.values())
        return dict(out)


def parse_raw(path: str) -> list[tuple[list[str], int]]:
    """py-spy's raw output: one stack a line (frames joined by ';', the count last); a command line with
    newlines in it spans lines."""
    stacks, pending = [], ""
    with open(path, errors="replace") as f:
        for line in f:
            pending += line.rstrip("\n")
            m = re.search(r" (\d+)$", pending)
            if m and not pending.endswith('"'):
                stacks.append((pending[:m.start()].split(";"), int(m.group(1))))
                pending = ""
            else:
                pending += "\n"
    return stacks


def kind_of(frames: list[str], root: int) -> tuple[str, str]:
    """(process kind, stage) of a stack: the innermost process frame names the process; a stage's entry
    point among the frames names the stage."""
    pids = [int(m.group(1)) for f in frames if (m := PROCESS.match(f))]
    stage = next((s for f in frames for entry, s in STAGES.items() if f.startswith(entry + " ")), "")
    if pids and pids[-1] == root:
        return "driver", stage or "driver"
    if stage:
        return f"{stage} worker", stage
    return "other Python (daemons, planning)", "other"


def summarise(stacks: list[tuple[list[str], int]], rate: int, root: int, top: int, records: int) -> str:
    cpu: Counter[str] = Counter()
    leaf: dict[str, Counter[str]] = {}
    inclusive: dict[str, Counter[str]] = {}
    for frames, count in stacks:
        kind, stage = kind_of(frames, root)
        cpu[kind] += count
        code = [f for f in frames if not PROCESS.match(f) and not f.startswith("thread ")]
        if not code:
            continue
        leaf.setdefault(stage, Counter())[code[-1]] += count
        for f in set(code):
            if "(streaming/" in f or re.search(r"\((?:[a-z_]+/)*[a-z_]+\.py\)$", f) and "pyspark" not in f:
                inclusive.setdefault(stage, Counter())[f] += count
    out = ["CPU-s by Python process kind (py-spy samples / rate), and CPU-us a record:"]
    out += [f"  {k:<36} {n / rate:7.2f}  {n / rate / records * 1e6:5.2f}" for k, n in cpu.most_common()]
    for stage in ("ingest", "compaction", "driver"):
        total = sum(leaf.get(stage, Counter()).values())
        if not total:
            continue
        out.append(f"{stage}: {total / rate:.2f} CPU-s sampled; own time (leaf frames):")
        out += [f"  {n / total:6.1%}  {f}" for f, n in leaf[stage].most_common(top)]
        out.append(f"{stage}: in all (inclusive), the package's and its libraries' functions:")
        out += [f"  {n / total:6.1%}  {f}" for f, n in inclusive.get(stage, Counter()).most_common(top)]
    return "\n".join(out)


def profile_shape(spark, broker, name: str, rate: int, top: int, work: str) -> None:
    shape = SHAPES[name]
    bs = broker.bootstrap_servers
    source = create_topic(bs, unique_topic_name("bench-src"), shape.partitions, {"retention.ms": "-1"})
    produce(bs, source, shape.records, shape.keys, shape.partitions, int(time.time() * 1000) - 2 * HOUR,
            value_bytes=shape.value_bytes)
    plain_s = run_job(spark, bs, source, new_sink(bs, shape.partitions), os.path.join(work, f"{name}-plain"))[0]
    raw = os.path.join(work, f"{name}.txt")
    spy = subprocess.Popen([PY_SPY, "record", "--subprocesses", "--nonblocking", "--nolineno", "--format", "raw",
                            "-r", str(rate), "-o", raw, "--pid", str(os.getpid())],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(1.0)  # py-spy attached
    phases = Phases()
    handler = phases.handler()
    logging.getLogger("streaming").addHandler(handler)
    logging.getLogger("streaming").setLevel(logging.DEBUG)
    jvm = spark.sparkContext._gateway.proc.pid  # the driver's JVM, launched by PySpark
    cpu_before = cpu_s(jvm), cpu_s(broker.pid)
    start = time.time()
    seconds, job = run_job(spark, bs, source, new_sink(bs, shape.partitions), os.path.join(work, name))
    end = time.time()
    jvm_cpu, broker_cpu = cpu_s(jvm) - cpu_before[0], cpu_s(broker.pid) - cpu_before[1]
    logging.getLogger("streaming").removeHandler(handler)
    logging.getLogger("streaming").setLevel(logging.INFO)
    spy.send_signal(signal.SIGINT)
    spy.wait(60)
    assert job.totals.emitted == min(shape.keys, shape.records), job.totals.to_doc()
    print(f"\n== {name}: {shape.records:,} records, {shape.keys:,} keys, {shape.partitions} partitions, "
          f"{shape.value_bytes} B values: {plain_s:.2f}s without py-spy, {seconds:.2f}s under it at {rate} Hz")
    for part, s in phases.walls(start, end).items():
        print(f"  wall {part:<36} {s:6.2f}s")
    print(f"  CPU-s Spark's JVM {jvm_cpu:.2f}, the broker {broker_cpu:.2f}")
    print(summarise(parse_raw(raw), rate, os.getpid(), top, shape.records))
    delete_topic(bs, source)
    for state_dir in (name, f"{name}-plain"):
        shutil.rmtree(os.path.join(work, state_dir), ignore_errors=True)


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    logging.getLogger("py4j").setLevel(logging.WARNING)
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", default="distinct,entities", help=f"comma-separated, of {', '.join(SHAPES)}")
    ap.add_argument("--rate", type=int, default=100, help="py-spy samples a second")
    ap.add_argument("--top", type=int, default=12, help="functions listed per stage")
    ap.add_argument("--warm-up", type=int, default=200_000, help="records of the warm-up run")
    args = ap.parse_args()
    names = args.shape.split(",")
    unknown = [n for n in names if n not in SHAPES]
    if unknown:
        raise SystemExit(f"unknown shape {unknown[0]!r}; one of {', '.join(SHAPES)}")
    work = tempfile.mkdtemp(prefix="kcompact-bench-profile-")
    try:
        with acquire_broker() as broker:
            bs = broker.bootstrap_servers
            spark = build_session("kcompact-bench")
            run_job(spark, bs, warm_up_topic(bs, args.warm_up, 4), new_sink(bs, 4), os.path.join(work, "warm-up"))
            for name in names:
                profile_shape(spark, broker, name, args.rate, args.top, work)
            spark.stop()
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
