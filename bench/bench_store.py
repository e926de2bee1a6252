"""Partition logs on a local directory vs on an object store: the same records, the same code, side by side.

    python bench/bench_store.py [--records N --keys K --batch B]

The object store is MinIO on 127.0.0.1 (tests.minio, started and stopped here, its data on the local
disk): it has no network latency, so it measures what the log asks of a store (calls, bytes, no append or
rename), not what S3 itself costs. Phases, each timed on both:
append (micro-batches of B records, each one object and one manifest), a clean pass over everything,
and opening the log and reading it whole. A warm-up on a local directory runs first, so neither side
pays for compiling the codec.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from streaming.cleaner import CompactionConfig, LogCleanerManager
from streaming.partition_id import PartitionId
from streaming.log import batch_from_records, make_record
from streaming.state.layout import LogDir, open_partition_log
from streaming.state.stores import open_state_dir
from tests.minio import S3Server

CONFIG = CompactionConfig(segment_bytes=8 * 2**20, min_cleanable_dirty_ratio=0.0)


def run(uri: str, args: argparse.Namespace) -> dict[str, float]:
    state = open_state_dir(uri)
    where = LogDir.of(state, PartitionId("bench", 0))
    plog = open_partition_log(state, where, CONFIG.log_config)
    value = os.urandom(100)
    batches = [batch_from_records([make_record(i, b"key-%011d" % (i % args.keys), value, 1_700_000_000_000 + i)
                                   for i in range(start, min(args.records, start + args.batch))])
               for start in range(0, args.records, args.batch)]  # Arrow batches, as the ingest appends them
    t = time.perf_counter()
    for batch in batches:
        plog.append(batch, now_ms=1_700_000_000_000)
    plog.roll()
    figures = {"append": time.perf_counter() - t}
    t = time.perf_counter()
    outcome = LogCleanerManager(CONFIG).clean_partition(PartitionId("bench", 0), plog, now_ms=1_800_000_000_000)
    figures["clean"] = time.perf_counter() - t
    assert outcome.result is not None, outcome.error
    t = time.perf_counter()
    reopened = open_partition_log(state, where, CONFIG.log_config)
    survivors = sum(b.num_rows for b in reopened.read_batches())
    figures["open+read"] = time.perf_counter() - t
    assert survivors == args.keys, survivors
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--keys", type=int, default=100_000)
    parser.add_argument("--batch", type=int, default=50_000, help="records per append (one micro-batch)")
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="kcompact-bench-store-")
    server = S3Server(Path(work) / "minio")
    try:
        bucket = server.new_bucket()
        warm = argparse.Namespace(records=args.keys * 2, keys=args.keys, batch=args.batch)
        run(os.path.join(work, "warm-up"), warm)  # compiles the codec and the cleaner's kernels first
        local = run(os.path.join(work, "state"), args)
        remote = run(server.uri(bucket, "state"), args)
    finally:
        server.stop()
        shutil.rmtree(work, ignore_errors=True)
    print(f"{args.records:,} records / {args.keys:,} keys, appends of {args.batch:,}")
    print(f"{'phase':10s} {'local dir s':>12s} {'object store s':>15s} {'ratio':>7s}")
    for phase in local:
        print(f"{phase:10s} {local[phase]:12.2f} {remote[phase]:15.2f} {remote[phase] / local[phase]:7.2f}")
    total_l, total_r = sum(local.values()), sum(remote.values())
    print(f"{'total':10s} {total_l:12.2f} {total_r:15.2f} {total_r / total_l:7.2f}  "
          f"({args.records / total_l:,.0f} vs {args.records / total_r:,.0f} records/s)")


if __name__ == "__main__":
    main()
