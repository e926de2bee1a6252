"""The pipeline at scale: `kcompact run --once` on 10M and then 100M records, for each key count, run as the
command a user runs, sampled from outside.

    python bench/bench_scale.py [--sizes 10000000,100000000 --keys 100000,10000000 --partitions 4]

For each key count and size: a topic of that many records (key i mod keys, 100-byte values, timestamps two
hours old and more, so max.compaction.lag.ms=60000 makes every segment cleanable; the topic is checked to
hold them all) is made, and one `kcompact run
--once` mirrors it into a fresh sink. Printed per run:
- seconds, and the time per record beyond start-up (a run on 1,000 records, measured first, is taken off)
  against the first size's (flat wanted: within 15%);
- the peak RSS of each process of the job's tree (the driver, Spark's JVM, the Python workers by kind),
  sampled every 0.5 s from /proc;
- the state dir's bytes at the end against the compacted size (the records that survive: keys x record);
- the driver JVM's peak heap in use (jcmd GC.heap_info, sampled), the memory the job holds in Spark's driver;
- what the machine read from disk during the run (a topic and log past the page cache are read back).
Sizes run smallest first; a size's source topic and state dir are deleted before the next one.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field

from pipeline_sides import HOUR, delete_topic, produce
from procs import cmdline, memory_mib, tree
from streaming.brokers.choice import acquire_broker
from streaming.partition_id import PartitionId
from streaming.kafka.admin import Cluster, create_topic, unique_topic_name

RECORD_BYTES = 16 + 100 + 24  # key, value, the log's per-record overhead (columns.RECORD_OVERHEAD)


@dataclass
class Sampler:
    """Peak RSS per process kind of a process tree, and the JVM's peak heap in use, sampled until stopped."""

    root: int
    rss_mib: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    heap_mib: float = 0.0
    disk_read_gib: float = 0.0  # by the whole machine during the run
    _stop: threading.Event = field(default_factory=threading.Event)

    def start(self) -> threading.Thread:
        thread = threading.Thread(target=self._run, daemon=True)
        thread.start()
        return thread

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        while not self._stop.wait(0.5):
            for pid in tree(self.root):
                kind = _kind(pid)
                if kind is None:
                    continue
                self.rss_mib[kind] = max(self.rss_mib[kind], memory_mib(pid, "VmRSS"))
                if kind == "spark JVM":
                    self.heap_mib = max(self.heap_mib, _heap_used_mib(pid))


def _kind(pid: int) -> str | None:
    cmd = cmdline(pid)
    if cmd is None:
        return None
    if "java" in cmd.split(" ")[0]:
        return "spark JVM"
    if "streaming.spark.daemon" in cmd:
        return "python worker (daemon or forked)"
    if "pyspark" in cmd:
        return "python planning runner"
    if "streaming" in cmd:
        return "driver (python)"
    return None


def _heap_used_mib(pid: int) -> float:
    jcmd = shutil.which("jcmd")
    if jcmd is None:
        return 0.0
    done = subprocess.run([jcmd, str(pid), "GC.heap_info"], capture_output=True, text=True, timeout=20)
    used = re.search(r"garbage-first heap\s+total \d+K, used (\d+)K", done.stdout)
    return int(used[1]) / 1024 if used else 0.0


def _du(path: str) -> int:
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(path) for f in files)


def _disk_read_gib() -> float:
    """What the whole machine has read from its disks so far (pgpgin counts KiB): a topic and log larger than
    the page cache is read back from disk, which a run that fits in memory never does."""
    with open("/proc/vmstat") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("pgpgin ")) / 2**20


def run_once(bootstrap: str, source: str, state_dir: str) -> tuple[float, Sampler]:
    sink = unique_topic_name("bench-scale-sink")
    command = [sys.executable, "-m", "streaming", "--log-level", "WARNING", "run", "--once",
               "--bootstrap-servers", bootstrap, "--source-topic", source, "--sink-topic", sink,
               "--state-dir", state_dir, "--config", "max.compaction.lag.ms=60000",
               "--sink-topic-config", "cleanup.policy=delete"]
    t, read = time.perf_counter(), _disk_read_gib()
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL)
    sampler = Sampler(proc.pid)
    thread = sampler.start()
    code = proc.wait()
    seconds = time.perf_counter() - t
    sampler.disk_read_gib = _disk_read_gib() - read
    sampler.stop()
    thread.join()
    if code != 0:
        raise SystemExit(f"kcompact run --once exited {code}")
    delete_topic(bootstrap, sink)
    return seconds, sampler


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="10000000,100000000")
    ap.add_argument("--keys", default="100000,10000000")
    ap.add_argument("--partitions", type=int, default=4)
    args = ap.parse_args()
    sizes = sorted(int(n) for n in args.sizes.split(","))
    work = tempfile.mkdtemp(prefix="kcompact-bench-scale-")
    try:
        with acquire_broker() as broker:
            bs = broker.bootstrap_servers
            tiny = create_topic(bs, unique_topic_name("bench-scale-start"), args.partitions, {"retention.ms": "-1"})
            produce(bs, tiny, 1_000, 100, args.partitions, int(time.time() * 1000) - 2 * HOUR)
            start_up = run_once(bs, tiny, os.path.join(work, "start-up"))[0]
            print(f"start-up (a run on 1,000 records): {start_up:.1f}s", flush=True)
            for keys in (int(k) for k in args.keys.split(",")):
                first: float | None = None
                for records in sizes:
                    source = create_topic(bs, unique_topic_name("bench-scale"), args.partitions, {"retention.ms": "-1"})
                    t = time.perf_counter()
                    # one ms apart, all in the past: a broker refuses a record stamped over an hour ahead
                    produce(bs, source, records, keys, args.partitions, int(time.time() * 1000) - 2 * HOUR - records)
                    made = time.perf_counter() - t
                    held = Cluster("source", bs).offset_ranges(PartitionId(source, p) for p in range(args.partitions))
                    assert sum(high - low for low, high in held.values()) == records, held
                    state_dir = os.path.join(work, f"state-{keys}-{records}")
                    seconds, sampler = run_once(bs, source, state_dir)
                    per_record = (seconds - start_up) / records
                    first = first or per_record
                    compacted = min(keys, records) * RECORD_BYTES
                    print(f"keys {keys:,}, records {records:,} (produced in {made:.0f}s): {seconds:.1f}s, "
                          f"{1e6 * per_record:.2f} us/record beyond start-up ({per_record / first:.3f} of the first size's); state dir "
                          f"{_du(state_dir) / 2**20:,.0f} MiB for a compacted size of {compacted / 2**20:,.0f} MiB; "
                          f"driver JVM heap in use at most {sampler.heap_mib:,.0f} MiB; read from disk "
                          f"{sampler.disk_read_gib:.1f} GiB", flush=True)
                    for kind, mib in sorted(sampler.rss_mib.items()):
                        print(f"    peak RSS {kind}: {mib:,.0f} MiB", flush=True)
                    shutil.rmtree(state_dir, ignore_errors=True)
                    delete_topic(bs, source)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
