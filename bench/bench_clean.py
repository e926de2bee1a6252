"""Cleaner benchmarks, figures printed side by side from one run.

    python bench/bench_clean.py map                      # offset-map bytes per key
    python bench/bench_clean.py throughput [--records N --keys K]
                                  # clean pass vs bare fastavro read+write of the same segments
    python bench/bench_clean.py rss [--keys 10000000 --buffer-mib 64]
                                  # peak RSS cleaning distinct keys in a fixed buffer (fresh process)
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import fastavro

from streaming.cleaner import CompactionConfig, LogCleanerManager, OffsetMap, PartitionId
from streaming.log import PartitionLog, make_record
from streaming.log.record import parsed_schema

PID = PartitionId("bench", 0)


def build_log(directory: str, records: int, keys: int, value_bytes: int, segment_bytes: int) -> PartitionLog:
    config = CompactionConfig(segment_bytes=segment_bytes, min_cleanable_dirty_ratio=0.0)
    plog = PartitionLog(directory, config.log_config, jitter_seed="bench-0")
    value = os.urandom(value_bytes)
    batch = 200_000
    for start in range(0, records, batch):
        plog.append([make_record(i, b"key-%011d" % (i % keys), value, 1_700_000_000_000 + i)
                     for i in range(start, min(records, start + batch))])
    plog.roll()
    return plog


def bench_map(_: argparse.Namespace) -> None:
    for versioned, label in ((False, "offset strategy"), (True, "timestamp/header strategy")):
        m = OffsetMap(128 * 2**20, versioned)
        print(f"{label:26s} {m.bytes_per_entry} bytes per slot; {m.nbytes / m.max_entries:.1f} bytes per key at "
              f"load factor 0.9; {m.max_entries:,} keys per pass in 128 MiB "
              f"(Kafka MD5: 24 B/slot, 5,033,164 keys)")


def bench_throughput(args: argparse.Namespace) -> None:
    work = tempfile.mkdtemp(prefix="kcompact-bench-clean-")
    try:
        t = time.perf_counter()
        plog = build_log(os.path.join(work, "log"), args.records, args.keys, 100, 16 * 2**20)
        print(f"built {args.records:,} records / {args.keys:,} keys in {len(plog.segments) - 1} segments "
              f"({time.perf_counter() - t:.1f}s)")
        segment_files = sorted(glob.glob(os.path.join(work, "log", "*.avro")))

        t = time.perf_counter()
        out = os.path.join(work, "bare")
        os.makedirs(out)
        for path in segment_files:
            with open(path, "rb") as src, open(os.path.join(out, os.path.basename(path)), "wb") as dst:
                fastavro.writer(dst, parsed_schema(), fastavro.reader(src), codec="null")
        bare = time.perf_counter() - t

        config = CompactionConfig(segment_bytes=16 * 2**20, min_cleanable_dirty_ratio=0.0)
        t = time.perf_counter()
        outcome = LogCleanerManager(config).clean_partition(PID, plog, now_ms=1_800_000_000_000)
        clean = time.perf_counter() - t
        r = outcome.result
        print(f"bare fastavro read+write  {args.records / bare:12,.0f} records/s  {bare:7.2f}s")
        print(f"clean pass                {args.records / clean:12,.0f} records/s  {clean:7.2f}s  "
              f"(read {r.records_read:,}, removed {r.records_removed:,}, "
              f"recopy {100 * r.bytes_written / r.bytes_read:.1f}%)")
        print(f"ratio clean/bare = {bare / clean:.3f}  (target >= 0.7)")
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _proc_status_bytes(field: str) -> int:
    """VmRSS / VmHWM of this process. Unlike ru_maxrss, VmHWM starts afresh at exec, so a child does not
    inherit the peak of the parent that forked it."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"{field} not in /proc/self/status")


def _rss_child(directory: str, buffer_mib: int) -> None:
    """Runs in a fresh process: open the log, then clean it to the end, reporting memory."""
    plog = PartitionLog(directory, CompactionConfig(min_cleanable_dirty_ratio=0.0).log_config, jitter_seed="bench-0")
    config = CompactionConfig(min_cleanable_dirty_ratio=0.0, dedupe_buffer_size=buffer_mib * 2**20)
    opened = _proc_status_bytes("VmRSS")
    next(plog.read_batches(0))  # numba loads the compiled codec on first use: code, not data
    before = _proc_status_bytes("VmRSS")
    manager = LogCleanerManager(config)
    passes = 0
    t = time.perf_counter()
    while (outcome := manager.clean_partition(PID, plog, now_ms=1_800_000_000_000)).result is not None:
        passes += 1
        print(f"  pass {passes}: [{outcome.result.start_offset:,}, {outcome.result.end_offset:,}) "
              f"map {100 * outcome.result.buffer_utilization:.0f}% full, {outcome.result.elapsed_s:.1f}s",
              file=sys.stderr, flush=True)
    peak = _proc_status_bytes("VmHWM")
    print(json.dumps({"opened": opened, "before": before, "peak": peak, "passes": passes, "secs": time.perf_counter() - t,
                      "map_bytes": manager.cleaner.map.nbytes, "records": sum(1 for _ in plog.read())}))


def bench_rss(args: argparse.Namespace) -> None:
    work = tempfile.mkdtemp(prefix="kcompact-bench-rss-")
    try:
        t = time.perf_counter()
        build_log(os.path.join(work, "log"), args.keys, args.keys, 10, 256 * 2**20)
        print(f"built {args.keys:,} distinct keys ({time.perf_counter() - t:.0f}s)")
        proc = subprocess.run([sys.executable, __file__, "_rss_child", os.path.join(work, "log"),
                               str(args.buffer_mib)], capture_output=True, text=True, check=True)
        sys.stderr.write(proc.stderr)
        m = json.loads(proc.stdout.strip().splitlines()[-1])
        mib = 2**20
        print(f"RSS after imports+open {m['opened'] / mib:8.1f} MiB")
        print(f"  + compiled codec loaded {m['before'] / mib:8.1f} MiB  (and one batch read)")
        print(f"peak RSS               {m['peak'] / mib:8.1f} MiB  (buffer {args.buffer_mib} MiB, map arrays "
              f"{m['map_bytes'] / mib:.1f} MiB)")
        print(f"peak - before          {(m['peak'] - m['before']) / mib:8.1f} MiB  "
              f"(target: within {args.buffer_mib} MiB + a constant)")
        print(f"passes {m['passes']}, {m['secs']:.0f}s, records kept {m['records']:,}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "_rss_child":
        _rss_child(sys.argv[2], int(sys.argv[3]))
        return
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="what", required=True)
    sub.add_parser("map").set_defaults(func=bench_map)
    p = sub.add_parser("throughput")
    p.add_argument("--records", type=int, default=1_000_000)
    p.add_argument("--keys", type=int, default=100_000)
    p.set_defaults(func=bench_throughput)
    p = sub.add_parser("rss")
    p.add_argument("--keys", type=int, default=10_000_000)
    p.add_argument("--buffer-mib", type=int, default=64)
    p.set_defaults(func=bench_rss)
    args = ap.parse_args()
    args.func(args)


if __name__ == "__main__":
    main()
