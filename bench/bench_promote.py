"""The RTO of a planned switch: `kcompact promote` of a caught-up mirror of a whole cluster, timed as a user
meets it, from the command's start to its exit (the DR site writable, the groups synced, the report written).

    python bench/bench_promote.py [--topics 400 --partitions 5 --records 20000 --groups 20]

Two local brokers (the primary and the DR site). --topics topics of --partitions partitions get --records
records (two hours old), and --groups consumer groups commit on ten topics each; one `kcompact run --once
--drain --sync-group-offsets` mirrors them all. Then, printed:
- `failover --dry-run` (the drill: the report, nothing changed);
- `promote` of the caught-up mirror (the target: at most 30 s at 2,000 partitions);
- for comparison, `promote` of a mirror with new records in ten topics (it runs the job once more).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from pipeline_sides import HOUR, produce  # the script beside this one (its directory leads sys.path)

from streaming.brokers.choice import start_local_broker

KCOMPACT = [sys.executable, "-m", "streaming"]


def kcompact(*argv: str) -> tuple[float, subprocess.CompletedProcess]:
    began = time.monotonic()
    done = subprocess.run([*KCOMPACT, *argv], capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"kcompact {argv[0]} failed ({done.returncode}): {done.stderr[-3000:]}")
    return time.monotonic() - began, done


def make_topics(bootstrap: str, names: list[str], partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(n, partitions, 1, config={"cleanup.policy": "compact"}) for n in names],
                                  operation_timeout=120, request_timeout=120)
    for f in futures.values():
        f.result(120)


def commit_groups(bootstrap: str, groups: int, topics: list[str], partitions: int) -> None:
    for g in range(groups):
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-group-{g}",
                             "enable.auto.commit": False})
        chosen = topics[g * 10 % len(topics):][:10]
        consumer.commit(offsets=[TopicPartition(t, p, 1) for t in chosen for p in range(partitions)],
                        asynchronous=False)
        consumer.close()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--topics", type=int, default=400)
    p.add_argument("--partitions", type=int, default=5)
    p.add_argument("--records", type=int, default=20_000)
    p.add_argument("--groups", type=int, default=20)
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-promote-") as work:
        primary = start_local_broker(data_dir=f"{work}/primary")
        dr = start_local_broker(data_dir=f"{work}/dr")
        try:
            source, sink = primary.bootstrap_servers, dr.bootstrap_servers
            topics = [f"whole-{i:03d}" for i in range(args.topics)]
            make_topics(source, topics, args.partitions)
            produce(source, topics, args.records, args.records // 4, args.partitions, int(time.time() * 1000) - 2 * HOUR)
            commit_groups(source, args.groups, topics, args.partitions)
            state = f"{work}/state"
            took, _ = kcompact("run", "--bootstrap-servers", source, "--source-topic-pattern", "whole-.*",
                               "--sink-bootstrap-servers", sink, "--sink-topic-template", "{topic}", "--state-dir",
                               state, "--once", "--drain", "--config", "max.compaction.lag.ms=60000",
                               "--sync-group-offsets", "bench-group-.*")
            print(f"{args.topics} topics, {args.topics * args.partitions:,} partitions, {args.records:,} records, "
                  f"{args.groups} groups; the mirror's run: {took:.1f} s")
            took, done = kcompact("failover", "--state-dir", state, "--group", "bench-group-.*", "--dry-run", "--json")
            report = json.loads(done.stdout)
            print(f"failover --dry-run (the drill): {took:.1f} s; RPO {report['rpo_records']} records, "
                  f"{len(report['groups'])} group partitions")
            took, done = kcompact("promote", "--state-dir", state, "--group", "bench-group-.*", "--json")
            report = json.loads(done.stdout)
            print(f"promote, caught up: {took:.1f} s (target 30 s); RPO {report['rpo_records']} records, "
                  f"{len(report['groups'])} group partitions, groups synced: {report['groups_synced']}")

            lagging = f"{work}/state-lagging"
            kcompact("run", "--bootstrap-servers", source, "--source-topic-pattern", "whole-.*",
                     "--sink-bootstrap-servers", sink, "--sink-topic-template", "{topic}.lagging", "--state-dir",
                     lagging, "--once", "--drain", "--config", "max.compaction.lag.ms=60000")
            produce(source, topics[:10], 1_000, 1_000, args.partitions, int(time.time() * 1000))
            took, done = kcompact("promote", "--state-dir", lagging, "--json")
            report = json.loads(done.stdout)
            print(f"promote, 1,000 records behind in 10 topics: {took:.1f} s (the job runs once more); RPO "
                  f"{report['rpo_records']} records")
        finally:
            dr.stop()
            primary.stop()


if __name__ == "__main__":
    main()
