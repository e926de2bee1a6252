"""The compacted state as a table: `kcompact snapshot` from the state dir, against what users do today,
reading a topic into a Spark DataFrame and keeping each key's last record with a window function.

    python bench/bench_snapshot.py [--records 10000000 --keys 1000000 --partitions 4 --rounds 2]

One topic of the given shape (record i has key i mod keys) is compacted by a `kcompact run --once` (timed
too: it runs anyway for the mirror), then each round times, side by side:
- snapshot-parquet: `kcompact snapshot --format parquet`, one file per partition;
- snapshot-iceberg: `kcompact snapshot --iceberg-table` into a new table (a first snapshot, whole);
- dedupe-sink: the sink topic (the job's emission, one record per key) read with Spark through the
  project's Kafka source (Spark's own connector is not published for this Spark), deduplicated with
  row_number() over (partition by key order by offset desc) and written as Parquet;
- dedupe-source: the same over the source topic, every record: the append-only topic users dedupe today.
Every side writes Parquet, and every side's row count is checked to be the number of keys.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time

from pipeline_sides import HOUR, new_sink, produce, run_job
from pyspark.sql import functions as F
from pyspark.sql.window import Window

from streaming.brokers.choice import acquire_broker
from streaming.iceberg import snapshot_to
from streaming.iceberg.target import IcebergTarget
from streaming.kafka.admin import create_topic, unique_topic_name
from streaming.spark.session import build_session
from streaming.state.stores import open_state_dir
from streaming.table.parquet_snapshot import write_parquet
from streaming.table.values import ValueFormat, ValueSpec

SIDES = ("snapshot-parquet", "snapshot-iceberg", "dedupe-sink", "dedupe-source")


def spark_dedupe(spark, bootstrap: str, topic: str, work: str) -> tuple[float, int]:
    """The topic into a DataFrame (materialized as Parquet by an availableNow query), each key's last record
    by a window, written as Parquet: seconds and rows."""
    raw, out = os.path.join(work, f"raw-{topic}"), os.path.join(work, f"dedup-{topic}")
    t = time.perf_counter()
    query = (spark.readStream.format("kcompact-kafka").option("kafka.bootstrap.servers", bootstrap)
             .option("subscribe", topic).option("startingOffsets", "earliest").load()
             .writeStream.format("parquet").option("path", raw).option("checkpointLocation", raw + ".checkpoint")
             .trigger(availableNow=True).start())
    query.awaitTermination()
    last = Window.partitionBy("topic", "partition", "key").orderBy(F.col("offset").desc())
    deduped = (spark.read.parquet(raw).withColumn("rank", F.row_number().over(last)).where("rank = 1")
               .where("value IS NOT NULL").drop("rank"))
    deduped.write.mode("overwrite").parquet(out)
    seconds = time.perf_counter() - t
    rows = spark.read.parquet(out).count()
    shutil.rmtree(raw, ignore_errors=True)
    shutil.rmtree(raw + ".checkpoint", ignore_errors=True)
    shutil.rmtree(out, ignore_errors=True)
    return seconds, rows


def snapshot_parquet(state_dir: str, work: str) -> tuple[float, int]:
    out = os.path.join(work, "snapshot-parquet")
    t = time.perf_counter()
    report = write_parquet(state_dir, out, ValueSpec(ValueFormat.BINARY))
    seconds = time.perf_counter() - t
    shutil.rmtree(out, ignore_errors=True)
    return seconds, report.rows


def snapshot_iceberg(state_dir: str, work: str) -> tuple[float, int]:
    base = os.path.join(work, "iceberg")
    os.makedirs(base, exist_ok=True)
    t = time.perf_counter()
    report = snapshot_to(state_dir, IcebergTarget("bench.state", f"sqlite:///{base}/catalog.db"), ValueSpec(ValueFormat.BINARY))
    seconds = time.perf_counter() - t
    shutil.rmtree(base, ignore_errors=True)
    return seconds, report.rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--records", type=int, default=10_000_000)
    p.add_argument("--keys", type=int, default=1_000_000)
    p.add_argument("--partitions", type=int, default=4)
    p.add_argument("--rounds", type=int, default=2)
    args = p.parse_args()
    work = tempfile.mkdtemp(prefix="kcompact-bench-snapshot-")
    results: dict[str, list[float]] = {side: [] for side in SIDES}
    try:
        with acquire_broker() as broker:
            bs = broker.bootstrap_servers
            source = create_topic(bs, unique_topic_name("bench-src"), args.partitions, {"retention.ms": "-1"})
            t = time.perf_counter()
            produce(bs, source, args.records, args.keys, args.partitions, int(time.time() * 1000) - 2 * HOUR)
            print(f"{args.records:,} records of {args.keys:,} keys produced in {time.perf_counter() - t:.1f}s",
                  flush=True)
            spark = build_session("kcompact-bench")
            sink = new_sink(bs, args.partitions)
            state_dir = os.path.join(work, "state")
            job_s, job = run_job(spark, bs, source, sink, state_dir)
            job.spec.save(open_state_dir(state_dir))  # as `kcompact run` does: the snapshot reads the topic's plan
            print(f"kcompact run --once (ingest, clean, emit {job.totals.emitted:,}): {job_s:.1f}s", flush=True)
            for i in range(args.rounds):
                sides = SIDES[i % len(SIDES):] + SIDES[:i % len(SIDES)]
                for side in sides:
                    if side == "snapshot-parquet":
                        seconds, rows = snapshot_parquet(state_dir, work)
                    elif side == "snapshot-iceberg":
                        seconds, rows = snapshot_iceberg(state_dir, work)
                    else:
                        seconds, rows = spark_dedupe(spark, bs, sink if side == "dedupe-sink" else source, work)
                    assert rows == args.keys, (side, rows)
                    results[side].append(seconds)
                print(f"round {i + 1}: " + "  ".join(f"{s} {results[s][-1]:.1f}s" for s in SIDES), flush=True)
            spark.stop()
        base = statistics.median(results["snapshot-parquet"])
        print(f"\n| {args.records:,} records, {args.keys:,} keys | median of {args.rounds} | / snapshot-parquet |")
        print("|---|---|---|")
        for side in SIDES:
            median = statistics.median(results[side])
            print(f"| {side} | {median:.1f} s | {median / base:.1f}x |")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
