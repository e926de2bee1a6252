"""The time a restart takes to catch up: `kcompact run` stopped (SIGKILL or SIGTERM) and started again.

    python bench/bench_restart.py [--rounds 3 --partitions 8 --records 1000 --trigger-interval 1]

One topic; a continuous `kcompact run` (max.compaction.lag.ms=1, so records are emitted as soon as they are
appended) catches up with a first --records records. Then each round stops it, SIGKILL and SIGTERM in turn,
writes --records new records of new keys, starts it again and times, from that start, the job's own lines
(their timestamps): the start-up checks done ("starting Spark"), Spark up, the query's first micro-batch
planned, its records appended; and the bench's read of the sink: every new record committed there. The sink
must hold each new record exactly once, and none emitted before the stop again.

--trees DIR [DIR ...] compares source trees (git worktrees of two commits) side by side: each restart runs
the job from the next tree in turn (its PYTHONPATH), on the same topic and state dir.
"""

from __future__ import annotations

import argparse
import datetime
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from streaming.brokers.choice import acquire_broker
from streaming.kafka.admin import create_topic, unique_topic_name
from streaming.kafka.headers.offset_header import source_offset

# (phase, the job's line that ends it); the last phase ends when the bench reads every new record in the sink
MARKS = (("checks", " INFO streaming.job.runner: starting Spark"),
         ("spark", " INFO streaming.spark.driver: Spark started in "),
         ("planning", " INFO streaming.spark.driver: micro-batch "),
         ("append", " INFO streaming.job.append: batch "))
PHASES = (*(name for name, _ in MARKS), "clean+emit")
CATCH_UP_LIMIT_S = 180.0


class SinkWatch:
    """A read_committed consumer of the sink from where it ends now: counts the records emitted since, and
    notes when the last of ``wanted`` source offsets arrived."""

    def __init__(self, bootstrap: str, sink: str, partitions: int) -> None:
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"watch-{sink}",
                                  "isolation.level": "read_committed", "enable.auto.commit": False,
                                  "fetch.wait.max.ms": 10})
        ends = [self.consumer.get_watermark_offsets(TopicPartition(sink, p), timeout=10)[1] for p in range(partitions)]
        self.consumer.assign([TopicPartition(sink, p, end) for p, end in enumerate(ends)])

    def wait_for(self, wanted: set[tuple[int, int]], limit_s: float) -> tuple[float, list[tuple[int, int]]]:
        """(the wall time the last wanted (partition, source offset) was read, every one read meanwhile)."""
        seen: list[tuple[int, int]] = []
        left, deadline = set(wanted), time.monotonic() + limit_s
        while left:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{len(left)} of {len(wanted)} records not in the sink after {limit_s:.0f}s")
            for m in self.consumer.consume(1000, timeout=0.05):
                if m.error() is None:
                    seen.append((m.partition(), source_offset(m.headers())))
                    left.discard(seen[-1])
        return time.time(), seen

    def close(self) -> None:
        self.consumer.close()


def source_ends(bootstrap: str, topic: str, partitions: int) -> list[int]:
    """Retried while a new topic's leaders are being elected."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-restart-ends"})
    try:
        for _ in range(50):
            try:
                return [c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(partitions)]
            except KafkaException:
                time.sleep(0.2)
        raise TimeoutError(f"no end offsets of {topic}")
    finally:
        c.close()


def written(bootstrap: str, topic: str, partitions: int, records: int, first_key: int) -> set[tuple[int, int]]:
    """Writes ``records`` records of keys never written before; the (partition, offset) of each."""
    before = source_ends(bootstrap, topic, partitions)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    value = os.urandom(100)
    for key in range(first_key, first_key + records):
        producer.produce(topic, key=b"key-%012d" % key, value=value, partition=key % partitions)
    assert producer.flush(60) == 0
    after = source_ends(bootstrap, topic, partitions)
    return {(p, o) for p in range(partitions) for o in range(before[p], after[p])}


def line_times(log_path: Path, since: int) -> dict[str, float]:
    """The wall time of each phase's line in the log written after byte ``since`` (its first occurrence)."""
    with open(log_path, errors="replace") as f:
        f.seek(since)
        text = f.read()
    times: dict[str, float] = {}
    for line in text.splitlines():
        for name, mark in MARKS:
            if name not in times and mark in line:
                stamp = datetime.datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f")
                times[name] = stamp.timestamp()
    return times


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3, help="rounds of SIGKILL then SIGTERM")
    ap.add_argument("--records", type=int, default=1000)
    ap.add_argument("--partitions", type=int, default=8)
    ap.add_argument("--trigger-interval", type=float, default=1.0)
    ap.add_argument("--log", type=Path, default=None, help="the job's log (default: in a temporary dir)")
    ap.add_argument("--trees", nargs="+", default=[None], help="source trees whose restarts alternate")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="kcompact-bench-restart-"))
    log_path = args.log or work / "job.log"
    rows: dict[str, list[dict[str, float]]] = {}
    try:
        with acquire_broker() as broker:
            bs = broker.bootstrap_servers
            source = create_topic(bs, unique_topic_name("restart-src"), args.partitions, {"retention.ms": "-1"})
            sink = unique_topic_name("restart-sink")
            command = [sys.executable, "-m", "streaming", "--log-level", "INFO", "run", "--bootstrap-servers", bs,
                       "--source-topic", source, "--sink-topic", sink, "--state-dir", str(work / "state"),
                       "--trigger-interval", str(args.trigger_interval), "--config", "max.compaction.lag.ms=1"]

            def start(tree: str | None) -> subprocess.Popen:
                env = {**os.environ, "PYTHONPATH": tree} if tree else None
                with open(log_path, "ab") as log:
                    return subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                            env=env)

            keys = 0
            first = written(bs, source, args.partitions, args.records, keys)
            keys += args.records
            job = start(args.trees[0])
            try:
                time.sleep(5)  # the sink topic is made by the job
                watch = SinkWatch(bs, sink, args.partitions)
                watch.consumer.assign([TopicPartition(sink, p, 0) for p in range(args.partitions)])
                watch.wait_for(first, CATCH_UP_LIMIT_S)
                watch.close()
                for i in range(args.rounds):
                    for sig, tree in ((g, t) for g in (signal.SIGKILL, signal.SIGTERM) for t in args.trees):
                        time.sleep(3)  # idle, as a running job is between batches
                        stopping = time.monotonic()
                        job.send_signal(sig)
                        code = job.wait(120)
                        stopped = time.monotonic() - stopping
                        if sig is signal.SIGTERM and code != 0:
                            raise RuntimeError(f"the job exited {code} on SIGTERM; see {log_path}")
                        watch = SinkWatch(bs, sink, args.partitions)
                        new = written(bs, source, args.partitions, args.records, keys)
                        keys += args.records
                        since = log_path.stat().st_size
                        began = time.time()
                        job = start(tree)
                        done, seen = watch.wait_for(new, CATCH_UP_LIMIT_S)
                        time.sleep(2)  # anything emitted twice would follow at once
                        seen += [(m.partition(), source_offset(m.headers())) for m in watch.consumer.consume(10000, 1)]
                        watch.close()
                        if sorted(seen) != sorted(new):
                            raise RuntimeError(f"the sink got {len(seen)} records for {len(new)} new ones "
                                               f"({len(set(seen) - new)} not new, {len(seen) - len(set(seen))} twice)")
                        marks = line_times(log_path, since)
                        ends = [marks.get(name) for name in PHASES[:-1]] + [done]
                        row, last = {}, began
                        for phase, end in zip(PHASES, ends, strict=True):
                            row[phase] = end - last if end is not None else float("nan")
                            last = end if end is not None else last
                        row["total"] = done - began
                        label = sig.name + (f" {tree}" if tree else "")
                        rows.setdefault(label, []).append(row)
                        print(f"round {i + 1} {label} (stopped in {stopped:.1f}s): "
                              + ", ".join(f"{k} {v:.2f}s" for k, v in row.items()), flush=True)
            finally:
                if job.poll() is None:
                    job.send_signal(signal.SIGTERM)
                    job.wait(120)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print()
    width = max(map(len, rows), default=0) + 2
    print(f"{'median of ' + str(args.rounds):<{width}}" + "".join(f"{name:>12}" for name in (*PHASES, "total")))
    for sig, runs in rows.items():
        print(f"{sig:<{width}}" + "".join(f"{statistics.median(r[name] for r in runs):>11.2f}s"
                                      for name in (*PHASES, "total")))


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
