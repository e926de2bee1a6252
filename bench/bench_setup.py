"""Round trips of a compaction task's emitter set-up across a WAN link, counted from librdkafka's own protocol log
(every request it sends and every response it gets), not by timing; the time is printed beside.

    python bench/bench_setup.py [--rtt-ms 50] [--tasks 3]

The sink broker is behind a Toxiproxy link of --rtt-ms round trip (bench/wan.py); each task's set-up is made
as a compaction task makes it, from new clients: its emitter (streaming.kafka.sink.task_emitter.TaskEmitter: its
init_transactions fences the slot's id), then its sink partitions' states read in bulk after the fence
(streaming.kafka.sink.sink_state.SinkStateReader's read_states). A task whose partitions are as the job's last stage left them
(or empty) reads nothing else of the sink before it writes: this is its whole set-up.
"""

from __future__ import annotations

import argparse
import re
import statistics
import tempfile
import time
from pathlib import Path

from confluent_kafka.admin import AdminClient
from wan import Link, wan_site
from streaming.kafka import client_log
from streaming.kafka.admin import create_topic, unique_topic_name
from streaming.kafka.client_settings import client_settings
from streaming.kafka.headers.origin_header import Origins
from streaming.kafka.sink.sink_state import read_states
from streaming.kafka.sink.task_emitter import TaskEmitter
from streaming.partition_id import PartitionId

SENT = re.compile(r"Sent (\w+)Request")
ORIGINS = Origins("bench-source", "bench-sink")


class _Requests:
    """In place of the clients' log (streaming.kafka.client_log), which drops repeated lines: every line kept."""

    def __init__(self) -> None:
        self.sent: list[str] = []

    def log(self, level: int, fmt: str, *args) -> None:
        if m := SENT.search(fmt % args if args else fmt):
            self.sent.append(m[1])


def setup(bootstrap: str, slot: int, sinks: list[PartitionId]) -> tuple[list[str], list[str], float, float]:
    """The requests one task's fence and its read of the sinks sent, in order, and the seconds of each."""
    requests = _Requests()
    client_log._LOG = requests
    t = time.perf_counter()
    emitter = TaskEmitter(bootstrap, f"kcompact-bench-{slot}", {"debug": "protocol"}, origins=ORIGINS)
    fence_s = time.perf_counter() - t
    emitter.producer.poll(0)  # the log lines of the set-up reach the logger as the client's queue is served
    fenced = list(requests.sent)
    t = time.perf_counter()
    admin = AdminClient(client_settings(emitter.client_config))  # as SinkStateReader makes it
    read_states(admin, sinks, 30)
    read_s = time.perf_counter() - t
    admin.poll(0)
    read = requests.sent[len(fenced):]
    emitter.close()
    return fenced, read, fence_s, read_s


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rtt-ms", type=int, default=50)
    ap.add_argument("--tasks", type=int, default=3, help="set-ups made one after another, each a task's")
    ap.add_argument("--partitions", type=int, default=50, help="the sink partitions of each task")
    args = ap.parse_args()
    link = Link(rtt_ms=args.rtt_ms)
    with tempfile.TemporaryDirectory(prefix="kcompact-bench-setup-") as work, wan_site(Path(work), link) as site:
        far = site.sink.bootstrap_servers  # through the link's proxy
        topic = create_topic(far, unique_topic_name("bench-setup"), args.partitions)
        sinks = [PartitionId(topic, p) for p in range(args.partitions)]
        results = [setup(far, slot, sinks) for slot in range(args.tasks)]
    print(f"across {link.describe()}, {args.partitions} sink partitions a task:")
    for slot, (fenced, read, fence_s, read_s) in enumerate(results):
        for what, sent, seconds in (("fence", fenced, fence_s), ("read of the sinks", read, read_s)):
            print(f"  task {slot} {what}: {len(sent)} requests ({', '.join(sent)}), {seconds:.2f}s = "
                  f"{seconds * 1000 / args.rtt_ms:.1f} round trips of time")
    print(f"median: fence {statistics.median(len(r[0]) for r in results)} requests "
          f"{statistics.median(r[2] for r in results):.2f}s, read {statistics.median(len(r[1]) for r in results)} "
          f"requests {statistics.median(r[3] for r in results):.2f}s")


if __name__ == "__main__":
    main()
