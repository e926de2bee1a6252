"""Append throughput of the partition log vs. a bare fastavro writer of the same records, same run.

    python bench/bench_append.py [--records 1000000] [--batch 100000]

Both write the same pre-built records (16-byte keys, 100-byte values, one header) to the same disk. The
log appends them in micro-batch-sized calls with fsync on, as the pipeline does: once as dicts (validated
against the schema, then converted), and once as Arrow batches of the log's columns, the form ingest hands
it. The ratio is taken on the dict form, the same input fastavro gets.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time

import fastavro

from streaming.log import LogConfig, PartitionLog, batch_from_records, make_record
from streaming.log.record import parsed_schema


def build(n: int) -> list[dict]:
    value = os.urandom(100)
    return [make_record(i, b"key-%012d" % (i % 100_000), value, 1_700_000_000_000 + i, [("src", b"bench")])
            for i in range(n)]


def bare_fastavro(records: list[dict], path: str) -> float:
    t = time.perf_counter()
    with open(path, "wb") as f:
        fastavro.writer(f, parsed_schema(), records, codec="null")
        f.flush()
        os.fsync(f.fileno())
    return time.perf_counter() - t


def partition_log(chunks: list, directory: str) -> float:
    t = time.perf_counter()
    log = PartitionLog(directory, LogConfig(), jitter_seed="bench-0")
    for chunk in chunks:
        log.append(chunk)
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--batch", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    records = build(args.records)
    dicts = [records[i: i + args.batch] for i in range(0, len(records), args.batch)]
    batches = [batch_from_records(chunk) for chunk in dicts]
    payload_mb = (16 + 100) * args.records / 1e6
    work = tempfile.mkdtemp(prefix="kcompact-bench-")
    try:
        best_bare = best_log = best_columns = float("inf")
        for r in range(args.rounds):
            best_bare = min(best_bare, bare_fastavro(records, os.path.join(work, f"bare-{r}.avro")))
            best_log = min(best_log, partition_log(dicts, os.path.join(work, f"log-{r}")))
            best_columns = min(best_columns, partition_log(batches, os.path.join(work, f"columns-{r}")))
        size_mb = os.path.getsize(os.path.join(work, "bare-0.avro")) / 1e6
        for name, secs in (("bare fastavro writer", best_bare), ("partition log append", best_log),
                           ("  the same, Arrow batches", best_columns)):
            print(f"{name:26s} {args.records / secs:12,.0f} records/s  {size_mb / secs:8.1f} MB/s (file)  "
                  f"{payload_mb / secs:8.1f} MB/s (key+value)  best of {args.rounds}: {secs:.3f}s")
        print(f"ratio log/bare = {best_bare / best_log:.3f}  (target >= 0.8)")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
