"""Start-up, measured as a user meets it: `kcompact run` as a command, from its start.

    python bench/bench_start.py [--rounds 3 --records 1000 --partitions 4]

fresh: a new topic of --records records (two hours old, so `--config max.compaction.lag.ms=60000` makes
them cleanable at once, as a topic with a KIP-354 bound of a minute would be); `kcompact run --once` on it,
timed from the command's start to the first record in the sink (its end offsets, polled) and to its exit.
quiet: the same command again, with nothing new on the source and nothing due (issue 24's targets: the
first record in the sink within 12 s, a quiet run within 8 s).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from bench_pipeline import HOUR, produce  # the script beside this one (its directory leads sys.path)
from confluent_kafka import Consumer, KafkaException, TopicPartition

from streaming.brokers.choice import acquire_broker
from streaming.kafka.admin import create_topic, unique_topic_name



def timed_run(bootstrap: str, source: str, sink: str, state_dir: str, partitions: int) -> tuple[float | None, float]:
    """(seconds to the first record in the sink, or None if none came; seconds to the command's exit)."""
    watcher = Consumer({"bootstrap.servers": bootstrap, "group.id": f"watch-{sink}"})
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "streaming", "run", "--once", "--bootstrap-servers", bootstrap,
                             "--source-topic", source, "--sink-topic", sink, "--state-dir", state_dir,
                             "--config", "max.compaction.lag.ms=60000"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    before, first = None, None
    while proc.poll() is None or first is None and before is None:
        try:
            in_sink = sum(watcher.get_watermark_offsets(TopicPartition(sink, p), timeout=5, cached=False)[1]
                          for p in range(partitions))
        except KafkaException:  # the sink is not made yet
            in_sink = None
        if in_sink is not None:
            before = in_sink if before is None else before
            if first is None and in_sink > before:
                first = time.perf_counter() - start
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    wall = time.perf_counter() - start
    err = proc.stderr.read()
    watcher.close()
    assert proc.returncode == 0, err[-2000:]
    return first, wall


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--records", type=int, default=1000)
    ap.add_argument("--partitions", type=int, default=4)
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="kcompact-bench-start-")
    firsts, fresh_walls, quiet_walls = [], [], []
    try:
        with acquire_broker() as broker:
            bs = broker.bootstrap_servers
            for i in range(args.rounds):
                source = create_topic(bs, unique_topic_name("start-src"), args.partitions, {"retention.ms": "-1"})
                produce(bs, source, args.records, args.records // 10, args.partitions, int(time.time() * 1000) - 2 * HOUR)
                sink, state_dir = unique_topic_name("start-sink"), os.path.join(work, f"state-{i}")
                first, wall = timed_run(bs, source, sink, state_dir, args.partitions)
                quiet = timed_run(bs, source, sink, state_dir, args.partitions)[1]
                firsts.append(first)
                fresh_walls.append(wall)
                quiet_walls.append(quiet)
                print(f"round {i + 1}: fresh topic: first record in the sink after {first:.2f}s, exit after "
                      f"{wall:.2f}s; again, nothing new: exit after {quiet:.2f}s", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"median of {args.rounds}: first record in the sink {statistics.median(firsts):.2f}s (target <= 12), "
          f"fresh run {statistics.median(fresh_walls):.2f}s, quiet --once {statistics.median(quiet_walls):.2f}s "
          f"(target <= 8)")


if __name__ == "__main__":
    main()
