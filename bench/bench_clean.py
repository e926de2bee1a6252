"""Cleaner benchmarks, figures printed side by side from one run.

    python bench/bench_clean.py map                      # offset-map bytes per key
    python bench/bench_clean.py throughput [--records N --keys K]
                                  # clean pass vs bare fastavro read+write of the same segments
    python bench/bench_clean.py rss [--keys 10000000 --buffer-mib 64]
                                  # peak RSS cleaning distinct keys in a fixed buffer (fresh process)
    python bench/bench_clean.py kafka [--records N --keys K]
                                  # clean pass vs Apache Kafka's LogCleaner on the same records

kafka: the same records (keys, 100-byte values, timestamps) go into one partition of a topic on the local
Apache Kafka and into the compactor's log. The topic is written with cleanup.policy=delete, its last segment
rolled, and only then switched to compact, so Kafka's cleaner cleans the whole of it in one pass; its time
and record count are read from the statistics Kafka's cleaner writes to its log-cleaner.log.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

import fastavro

from streaming.cleaner import CompactionConfig, LogCleanerManager, OffsetMap
from streaming.partition_id import PartitionId
from streaming.log import PartitionLog, make_record
from streaming.log.record import parsed_schema

PID = PartitionId("bench", 0)


def bench_records(start: int, stop: int, keys: int, value: bytes) -> list:
    return [make_record(i, b"key-%011d" % (i % keys), value, 1_700_000_000_000 + i) for i in range(start, stop)]


def build_log(directory: str, records: int, keys: int, value: bytes | int, segment_bytes: int) -> PartitionLog:
    config = CompactionConfig(segment_bytes=segment_bytes, min_cleanable_dirty_ratio=0.0)
    plog = PartitionLog(directory, config.log_config, jitter_seed="bench-0")
    value = os.urandom(value) if isinstance(value, int) else value
    batch = 200_000
    for start in range(0, records, batch):
        plog.append(bench_records(start, min(records, start + batch), keys, value))
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
        segment_files = sorted(glob.glob(os.path.join(work, "log", "segments", "*.avro")))

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


_STAMP = r"\[(?P<{}>\d{{4}}-\d\d-\d\d \d\d:\d\d:\d\d,\d{{3}})\]"


def _kafka_pass(cleaner_log: str, topic: str) -> tuple[float, int, int] | None:
    """(seconds, records in, records kept) of the first pass Kafka's cleaner logged for partition 0 of
    ``topic``: the records from its statistics, the time from its log lines' millisecond stamps (the
    statistics round it to 0.1 s), from "Beginning cleaning" to the statistics."""
    log = re.escape(f"{topic}-0")
    with open(cleaner_log, errors="replace") as f:
        text = f.read()
    began = re.search(_STAMP.format("t") + r" INFO Cleaner \d+: Beginning cleaning of log " + log + r"\b", text)
    done = re.search(_STAMP.format("t") + r" INFO \[kafka-log-cleaner-thread-\d+\]: \s*Log cleaner thread \d+ "
                     r"cleaned log " + log + r" .*?Start size: .*?\((?P<start>[0-9,]+) messages\)"
                     r".*?End size: .*?\((?P<end>[0-9,]+) messages\)", text, re.S)
    if began is None or done is None:
        return None

    def at(m: re.Match) -> float:
        return time.mktime(time.strptime(m["t"][:19], "%Y-%m-%d %H:%M:%S")) + int(m["t"][20:]) / 1000

    return at(done) - at(began), int(done["start"].replace(",", "")), int(done["end"].replace(",", ""))


def _kafka_clean(broker, records: int, keys: int, value: bytes) -> tuple[float, int, int]:
    """Produce the records to a fresh topic, then let Kafka's cleaner clean all of it in one pass."""
    from confluent_kafka import Producer  # only this benchmark talks to Kafka
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

    from streaming.kafka.admin import create_topic, unique_topic_name

    bs = broker.bootstrap_servers
    topic = create_topic(bs, unique_topic_name("bench-kafka-clean"), 1,
                         {"cleanup.policy": "delete", "retention.ms": "-1", "segment.bytes": str(16 * 2**20)})
    producer = Producer({"bootstrap.servers": bs, "linger.ms": 20, "batch.size": 1_000_000,
                         "queue.buffering.max.messages": 2_000_000})
    for start in range(0, records, 200_000):
        for r in bench_records(start, min(records, start + 200_000), keys, value):
            while True:
                try:
                    producer.produce(topic, key=r["key"], value=r["value"], partition=0, timestamp=r["timestamp"])
                    break
                except BufferError:
                    producer.poll(0.05)
    assert producer.flush(120) == 0
    admin = AdminClient({"bootstrap.servers": bs})

    def alter(**config: str) -> None:
        resource = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[
            ConfigEntry(k.replace("_", "."), v, incremental_operation=AlterConfigOpType.SET) for k, v in config.items()])
        for future in admin.incremental_alter_configs([resource]).values():
            future.result(30)

    alter(segment_ms="100")
    time.sleep(1)
    producer.produce(topic, key=b"end-of-bench", value=b"", partition=0)  # rolls the last segment of records
    assert producer.flush(30) == 0
    alter(cleanup_policy="compact", min_cleanable_dirty_ratio="0.01")
    deadline = time.monotonic() + 600
    while (cleaned := _kafka_pass(str(broker.server.cleaner_log), topic)) is None:
        if time.monotonic() > deadline:
            raise RuntimeError(f"Kafka's cleaner logged no pass over {topic} in {broker.server.cleaner_log}")
        time.sleep(1)
    return cleaned


def _our_clean(manager: LogCleanerManager, directory: str, records: int, keys: int,
               value: bytes) -> tuple[float, int, int]:
    plog = build_log(directory, records, keys, value, manager.config.segment_bytes)
    t = time.perf_counter()
    r = manager.clean_partition(PID, plog, now_ms=1_800_000_000_000).result
    return time.perf_counter() - t, r.records_read, r.records_read - r.records_removed


def bench_kafka(args: argparse.Namespace) -> None:
    """Each side first cleans --warm-up records of its own, as a long-running cleaner has long done: the
    broker's JVM compiles its cleaner's loops, and this process loads the compiled codec and map. Like a
    Kafka cleaner thread, which allocates its offset map once when it starts, one manager (holding one
    map) serves both of our passes; each pass still clears the map, as Kafka's does."""
    from streaming.brokers.broker import BrokerKind
    from streaming.brokers.choice import acquire_broker

    value = os.urandom(100)
    work = tempfile.mkdtemp(prefix="kcompact-bench-vs-kafka-")
    try:
        with acquire_broker() as broker:
            if broker.kind is not BrokerKind.LOCAL:
                raise SystemExit("bench_clean.py kafka reads the local broker's cleaner log: unset "
                                 "KAFKA_BOOTSTRAP_SERVERS (and run where no Docker engine answers)")
            _kafka_clean(broker, args.warm_up, args.warm_up // 10, value)
            kafka_s, kafka_in, kafka_kept = _kafka_clean(broker, args.records, args.keys, value)
        manager = LogCleanerManager(CompactionConfig(segment_bytes=16 * 2**20, min_cleanable_dirty_ratio=0.0))
        _our_clean(manager, os.path.join(work, "warm-up"), args.warm_up, args.warm_up // 10, value)
        ours_s, ours_in, ours_kept = _our_clean(manager, os.path.join(work, "log"), args.records, args.keys, value)
        print(f"Apache Kafka's LogCleaner {kafka_in / kafka_s:12,.0f} records/s  {kafka_s:7.2f}s  "
              f"(read {kafka_in:,}, kept {kafka_kept:,}; from its log-cleaner.log)")
        print(f"kcompact clean pass       {ours_in / ours_s:12,.0f} records/s  {ours_s:7.2f}s  "
              f"(read {ours_in:,}, kept {ours_kept:,})")
        print(f"ratio kcompact/Kafka = {(ours_in / ours_s) / (kafka_in / kafka_s):.3f}  (target >= 1.0; "
              f"both after a warm-up pass over {args.warm_up:,} records)")
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
    p = sub.add_parser("kafka")
    p.add_argument("--records", type=int, default=1_000_000)
    p.add_argument("--keys", type=int, default=100_000)
    p.add_argument("--warm-up", type=int, default=200_000, help="records of each side's warm-up pass")
    p.set_defaults(func=bench_kafka)
    p = sub.add_parser("rss")
    p.add_argument("--keys", type=int, default=10_000_000)
    p.add_argument("--buffer-mib", type=int, default=64)
    p.set_defaults(func=bench_rss)
    args = ap.parse_args()
    args.func(args)


if __name__ == "__main__":
    main()
