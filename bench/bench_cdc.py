"""A database's change stream as a table: how long a committed change in PostgreSQL takes to reach the
Iceberg table a job keeps with --snapshot-every, and what a snapshot of a Debezium topic costs by size.

    python bench/bench_cdc.py [--every 0 5] [--probes 10] [--sizes 10000 100000 300000]

Latency: a real PostgreSQL, Debezium 3.6.1's connector on Kafka Connect 4.3.0 (JsonConverter with schemas,
the envelope) and `kcompact run --snapshot-every N --snapshot-value-format debezium` as its own process;
each probe updates one row, and the time is taken from its COMMIT to the first scan of the Iceberg table
that shows the new value. Cost: topics of Debezium envelopes (the connector's own message shape, produced
directly so the sizes can be large) compacted by `kcompact run --once`, then a first snapshot of each size
to Parquet and to Iceberg, and one after 1% of the keys changed.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from confluent_kafka import Producer
from pipeline_sides import new_sink, run_job
from pyiceberg.catalog import load_catalog
from pyiceberg.expressions import EqualTo

from streaming.brokers.choice import acquire_broker
from streaming.iceberg import snapshot_to
from streaming.iceberg.snapshot import CATALOG_NAME
from streaming.iceberg.target import IcebergTarget
from streaming.kafka.admin import create_topic, unique_topic_name
from streaming.spark.session import build_session
from streaming.state.stores import open_state_dir
from streaming.table.parquet_snapshot import write_parquet
from streaming.table.values import ValueFormat, ValueSpec
from tests.cdc.connect import converters, start_connect
from tests.cdc.postgres import start_postgres

DEBEZIUM = ValueSpec(ValueFormat.DEBEZIUM)
PARTITIONS = 4
FIELDS = [{"type": "int32", "optional": False, "field": "id"}, {"type": "string", "optional": True, "field": "name"},
          {"type": "bytes", "optional": True, "name": "org.apache.kafka.connect.data.Decimal", "version": 1,
           "parameters": {"scale": "2", "connect.decimal.precision": "12"}, "field": "balance"},
          {"type": "int64", "optional": True, "name": "io.debezium.time.MicroTimestamp", "version": 1,
           "field": "updated_at"}]


def latency(every: float, probes: int, bootstrap: str, work: Path) -> list[float]:
    """Seconds from each probe's COMMIT to its row in the job's Iceberg table."""
    pg = start_postgres(work / "pg")
    connect = start_connect(bootstrap, work / "connect")
    target = IcebergTarget("cdc.customers", f"sqlite:///{work}/catalog.db")
    job = None
    try:
        with pg.connect() as conn:
            conn.execute("CREATE TABLE customers (id int PRIMARY KEY, name text, balance numeric(12,2), updated_at timestamp)")
            conn.execute("INSERT INTO customers SELECT i, 'n' || i, i / 100.0, now() FROM generate_series(1, 1000) i")
            prefix = unique_topic_name("cdc")
            connect.add_debezium("bench", pg, "public.customers", prefix, converters(True), PARTITIONS)
            topic = f"{prefix}.public.customers"
            with open(work / "job.log", "w") as log:
                job = subprocess.Popen([sys.executable, "-m", "streaming", "run", "--bootstrap-servers", bootstrap,
                                        "--source-topic", topic, "--sink-topic", f"{topic}.c", "--state-dir",
                                        str(work / "state"), "--trigger-interval", "0.5", "--snapshot-every", str(every),
                                        "--iceberg-table", target.table, "--iceberg-catalog", target.catalog,
                                        "--snapshot-value-format", "debezium"], stdout=log, stderr=subprocess.STDOUT)
            seen: list[float] = []
            for i in range(probes + 1):  # the first probe waits for the job's start too: not counted
                marker = f"probe-{every}-{i}"
                conn.execute("UPDATE customers SET name = %s WHERE id = 1", (marker,))
                committed = time.perf_counter()
                while True:
                    if job.poll() is not None:
                        raise RuntimeError(f"the job exited with {job.returncode}: see {work / 'job.log'}")
                    catalog = load_catalog(CATALOG_NAME, **target.settings())
                    if catalog.table_exists(target.table):
                        rows = catalog.load_table(target.table).scan(row_filter=EqualTo("id", 1),
                                                                     selected_fields=("name",)).to_arrow()
                        if rows.num_rows and rows.column("name")[0].as_py() == marker:
                            break
                    time.sleep(0.05)
                if i:
                    seen.append(time.perf_counter() - committed)
        return seen
    finally:
        if job is not None:
            job.terminate()
            job.wait(120)
        connect.stop()
        pg.stop()


def _envelope(i: int, version: int, op: str) -> bytes:
    row = {"type": "struct", "fields": FIELDS, "optional": True, "name": "cdc.public.customers.Value"}
    schema = {"type": "struct", "optional": False, "name": "cdc.public.customers.Envelope", "version": 2,
              "fields": [{**row, "field": "before"}, {**row, "field": "after"},
                         {"type": "string", "optional": False, "field": "op"}]}
    after = {"id": i, "name": f"name-{i}-{version}", "balance": "BNI=", "updated_at": 1795834003474844 + version}
    return json.dumps({"schema": schema, "payload": {"before": None, "after": after, "op": op}},
                      separators=(",", ":")).encode()


def _produce(bootstrap: str, topic: str, ids: range | list[int], version: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50, "compression.type": "lz4"})
    for i in ids:
        key = json.dumps({"schema": {"type": "struct", "fields": [FIELDS[0]], "optional": False},
                          "payload": {"id": i}}, separators=(",", ":")).encode()
        while True:
            try:
                producer.produce(topic, _envelope(i, version, "c" if version == 0 else "u"), key, partition=i % PARTITIONS)
                break
            except BufferError:
                producer.poll(0.1)
    assert producer.flush(120) == 0


def _timed(snapshot, state: str, output, rows: int) -> float:
    """Seconds of one snapshot, checked to hold ``rows`` rows written."""
    t = time.perf_counter()
    report = snapshot(state, output, DEBEZIUM)
    seconds = time.perf_counter() - t
    assert report.rows == rows, (report.rows, rows)
    return seconds


def snapshot_cost(sizes: list[int], bootstrap: str, work: Path) -> list[tuple]:
    """Per size: (rows, first Parquet s, first Iceberg s, 1%-changed Parquet s, 1%-changed Iceberg s)."""
    spark = build_session("kcompact-bench-cdc")
    out = []
    try:
        for size in sizes:
            topic = create_topic(bootstrap, unique_topic_name("cdc-bench"), PARTITIONS, {"cleanup.policy": "compact"})
            _produce(bootstrap, topic, range(size), 0)
            state = str(work / f"state-{size}")
            sink = new_sink(bootstrap, PARTITIONS)
            _, job = run_job(spark, bootstrap, topic, sink, state)
            job.spec.save(open_state_dir(state))
            parquet, target = str(work / f"parquet-{size}"), IcebergTarget(f"bench.t{size}", f"sqlite:///{work}/cat-{size}.db")
            first = (_timed(write_parquet, state, parquet, size), _timed(snapshot_to, state, target, size))
            changed = list(range(0, size, 101))  # about 1%, in every partition
            _produce(bootstrap, topic, changed, 1)
            run_job(spark, bootstrap, topic, sink, state)
            # Parquet rewrites each partition that moved whole; Iceberg upserts the keys that changed
            again = (_timed(write_parquet, state, parquet, size), _timed(snapshot_to, state, target, len(changed)))
            out.append((size, *first, *again))
            print(f"{size:,} rows: first parquet {first[0]:.2f}s iceberg {first[1]:.2f}s; 1% changed: parquet "
                  f"{again[0]:.2f}s iceberg {again[1]:.2f}s", flush=True)
    finally:
        spark.stop()
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--every", type=float, nargs="+", default=[0.0, 5.0])
    p.add_argument("--probes", type=int, default=10)
    p.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 300_000])
    args = p.parse_args()
    work = Path(tempfile.mkdtemp(prefix="kcompact-bench-cdc-"))
    try:
        with acquire_broker() as broker:
            bs = broker.bootstrap_servers
            waits = {every: latency(every, args.probes, bs, work / f"latency-{every}") for every in args.every}
            costs = snapshot_cost(args.sizes, bs, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("\n| --snapshot-every | probes | median s | p90 s | max s |\n|---|---|---|---|---|")
    for every, seen in waits.items():
        ordered = sorted(seen)
        print(f"| {every:g} | {len(seen)} | {statistics.median(seen):.2f} | {ordered[int(0.9 * (len(seen) - 1))]:.2f} "
              f"| {ordered[-1]:.2f} |")
    print("\n| rows | first Parquet s | first Iceberg s | 1% changed, Parquet s | 1% changed, Iceberg s | "
          "first Parquet, µs a row |\n|---|---|---|---|---|---|")
    for size, fp, fi, ap, ai in costs:
        print(f"| {size:,} | {fp:.2f} | {fi:.2f} | {ap:.2f} | {ai:.2f} | {fp / size * 1e6:.1f} |")


if __name__ == "__main__":
    main()
