"""A compaction task's storage work per partition, without Spark: fsyncs, storage calls and wall time.

    python bench/bench_stage_io.py [--partitions 500] [--records 5] [--keys 3] [--stages 3] [--rounds 2]
                                   [--store local|s3]

The whole-cluster shape as one task sees it: many partition logs, each getting a few records a stage (a
trickle), each record a winner. Each stage appends ``--records`` new records to every log, then runs one
compaction task over all of them (streaming.job.stage_task.compact_partitions: roll, clean, emit to a real
broker's sink topic, note). The first stage warms up; the later ones are measured. Per partition and per
stage it prints: fsyncs (os.fsync, counted in this process), the task's barriers (each one syncfs), storage calls (the log's Storage interface:
each is a request, or more, on an object store) and the task's wall time, with the task's storage work run
one partition at a time and on the task's I/O threads, side by side in each round. ``--store s3`` keeps the
logs on MinIO on 127.0.0.1 (tests.minio, started and stopped here): no network between, so it counts what a
stage asks of a store and how its requests overlap, not what S3's round trips cost.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Iterator

from confluent_kafka.admin import AdminClient

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests.minio


from streaming.brokers.choice import acquire_broker
from streaming.cleaner import CompactionConfig
from streaming.configuration.subscription import Subscribe
from streaming.job import task_io
from streaming.job.compact import StageTask
from streaming.job.spec import JobMapping, JobSpec, TopicPlan
from streaming.job.stage_task import compact_partitions
from streaming.kafka.admin import create_topic, unique_topic_name
from streaming.kafka.sink.sink_state import read_states
from streaming.log import batch_from_records, make_record
from streaming.log import storage as log_storage
from streaming.log.arrow_storage import ArrowStorage
from streaming.log.storage import LocalStorage
from streaming.partition_id import PartitionId
from streaming.state.layout import LogDir, log_dir, open_partition_log
from streaming.state.stores import open_state_dir
from tests.minio import S3Server

SOURCE = "trickle"
CALLS = ("list", "names", "subdirs", "exists", "get", "open_read", "put", "open_put", "put_if_absent", "delete")


def _kind(path: str) -> str:
    """A path as the kind of file it is: its folder and its name, numbers made N."""
    folder, name = os.path.split(path)
    return re.sub(r"[0-9a-f]{8,}|[0-9]+", "N", f"{os.path.basename(folder)}/{name}")


@contextlib.contextmanager
def counted(storage: type) -> Iterator[Counter]:
    """os.fsync, the barriers' syncfs and the storage class's calls, counted while the block runs."""
    counts: Counter = Counter()
    real_fsync, real_syncfs = os.fsync, log_storage.syncfs
    originals = {name: getattr(storage, name) for name in CALLS}

    def fsync(fd: int) -> None:
        counts["fsync"] += 1
        real_fsync(fd)

    def syncfs(fd: int) -> None:
        counts["syncfs"] += 1
        real_syncfs(fd)

    inside = threading.local()  # a call made by another (put by way of open_put) is not counted again

    def wrap(name: str, call):
        def counting(self, path, *args, **kwargs):
            if getattr(inside, "call", False):
                return call(self, path, *args, **kwargs)
            counts["calls"] += 1
            counts[f"{name} {_kind(path)}"] += 1
            inside.call = True
            try:
                return call(self, path, *args, **kwargs)
            finally:
                inside.call = False
        return counting

    os.fsync, log_storage.syncfs = fsync, syncfs
    for name, call in originals.items():
        setattr(storage, name, wrap(name, call))
    try:
        yield counts
    finally:
        os.fsync, log_storage.syncfs = real_fsync, real_syncfs
        for name, call in originals.items():
            setattr(storage, name, call)


def _stage(spec: JobSpec, dirs: list[LogDir], sink: str, offset: int, records: int, keys: int, threads: int,
           trusted: dict[PartitionId, int]) -> tuple[float, Counter]:
    """One stage's task; ``trusted`` (filled in here): what the sink committed of each partition, as the driver
    trusts it while nobody else writes the sink (streaming.job.sink_watch)."""
    state = open_state_dir(spec.state_dir)
    now = int(time.time() * 1000)
    for d in dirs:
        batch = batch_from_records([make_record(offset + i, b"%s-%d" % (str(d.pid).encode(), (offset + i) % keys),
                                                b"v" * 100, now - 3_600_000) for i in range(records)])
        open_partition_log(state, d, spec.topics[SOURCE].compaction.log_config).append(batch, now)
    sinks = read_states(AdminClient({"bootstrap.servers": spec.sink_bootstrap}),
                        [PartitionId(sink, d.pid.partition) for d in dirs], 30) if trusted else None
    task = StageTask(tuple(dirs), 0, sinks, dict(trusted))
    with counted(LocalStorage if state.local else ArrowStorage) as counts:
        start = time.perf_counter()
        reports = compact_partitions(task, 0, spec, int(time.time() * 1000), drain=True, io_threads=threads)
        wall = time.perf_counter() - start
    failed = [r for r in reports if r.error is not None]
    if failed:
        raise SystemExit(f"{len(failed)} partitions failed: {failed[0].error}")
    trusted.update((r.pid, r.emitted_up_to) for r in reports)
    return wall, counts


def one_round(bootstrap: str, store: str, partitions: int, records: int, keys: int, stages: int, threads: int
              ) -> tuple[tuple[float, float, float, float, float], Counter]:
    """Seconds, fsyncs and storage calls a partition a stage, and syncfs calls a stage (the task's barriers), the
    measured stages' medians, and the median seconds a partition of the last quarter of them (a log's cost as the job
    ages: what each open reads and each commit writes of it); and the last stage's storage calls by kind."""
    sink = create_topic(bootstrap, unique_topic_name("stage-io"), partitions, {"cleanup.policy": "compact"})
    config = CompactionConfig(max_compaction_lag_ms=1000)
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_DIR")) as local_dir:
        state_dir = local_dir if store == "local" else store
        spec = JobSpec(JobMapping(bootstrap, Subscribe((SOURCE,)), bootstrap, "{topic}.s"), state_dir,
                       {SOURCE: TopicPlan(SOURCE, sink, config, partitions)})
        state = open_state_dir(state_dir)
        dirs = [LogDir(PartitionId(SOURCE, p), log_dir(state, SOURCE, p)) for p in range(partitions)]
        trusted: dict[PartitionId, int] = {}
        measured = [_stage(spec, dirs, sink, s * records, records, keys, threads, trusted) for s in range(stages)][1:]
    return ((statistics.median(w for w, _ in measured) / partitions,
             statistics.median(c["fsync"] for _, c in measured) / partitions,
             statistics.median(c["calls"] for _, c in measured) / partitions,
             statistics.median(c["syncfs"] for _, c in measured),
             statistics.median(w for w, _ in measured[-max(1, len(measured) // 4):]) / partitions), measured[-1][1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=500)
    parser.add_argument("--records", type=int, default=5, help="new records a partition a stage")
    parser.add_argument("--keys", type=int, default=3, help="keys a partition: a stage's records update them")
    parser.add_argument("--stages", type=int, default=3, help="stages a round, the first one a warm-up")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--store", choices=("local", "s3"), default="local", help="where the logs are")
    args = parser.parse_args()
    if args.stages < 2:
        parser.error("--stages must be at least 2: the first one warms up")
    broker = acquire_broker()
    work = tempfile.mkdtemp(prefix="kcompact-bench-stage-io-")
    server = S3Server(Path(work) / "minio") if args.store == "s3" else None
    try:
        sides = {"one at a time": 1, f"{task_io.STORE_THREADS} I/O threads": task_io.STORE_THREADS}
        results: dict[str, list[tuple[float, float, float, float, float]]] = {s: [] for s in sides}
        kinds: Counter = Counter()
        for r in range(args.rounds):
            order = list(sides.items()) if r % 2 == 0 else list(reversed(sides.items()))
            for name, threads in order:
                store = "local" if server is None else server.uri(server.new_bucket())
                figures, kinds = one_round(broker.bootstrap_servers, store, args.partitions, args.records, args.keys,
                                           args.stages, threads)
                results[name].append(figures)
        print(f"{args.partitions} partitions on {args.store}, {args.records} new records each a stage over "
              f"{args.keys} keys, one task; medians of {args.rounds} rounds")
        print(f"{'side':<20} {'ms a partition':>15} {'last quarter':>13} {'fsyncs a partition':>19} "
              f"{'syncfs a task':>14} {'storage calls a partition':>26}")
        for name, rows in results.items():
            ms, fsyncs, calls, barriers, last = (statistics.median(col) for col in zip(*rows, strict=True))
            print(f"{name:<20} {ms * 1000:>15.2f} {last * 1000:>13.2f} {fsyncs:>19.1f} {barriers:>14.1f} "
                  f"{calls:>26.1f}")
        print("storage calls a partition in a stage, by kind:")
        for kind, count in sorted(kinds.items(), key=lambda kv: -kv[1]):
            if kind not in ("calls", "fsync", "syncfs"):
                print(f"  {count / args.partitions:>5.1f}  {kind}")
    finally:
        if server is not None:
            server.stop()
        shutil.rmtree(work, ignore_errors=True)
        broker.stop()


if __name__ == "__main__":
    main()
