"""Round trips of a compaction task's emitter set-up across a WAN link, counted from librdkafka's own protocol log
(every request it sends and every response it gets), not by timing; the time is printed beside.

    python bench/bench_setup.py [--rtt-ms 50] [--tasks 3]

The sink broker is behind a Toxiproxy link of --rtt-ms round trip (bench/wan.py); each task's emitter is made
as a compaction task makes it (streaming.kafka.task_emitter.TaskEmitter: its init_transactions fences the
slot's id), from a new client, as each task is. A task whose partitions the driver found as the job's last
stage left them (or empty) reads nothing else of the sink before it writes: this is its whole set-up.
"""

from __future__ import annotations

import argparse
import re
import statistics
import tempfile
import time
from pathlib import Path

from wan import Link, wan_site
from streaming.kafka import client_log
from streaming.kafka.task_emitter import TaskEmitter

SENT = re.compile(r"Sent (\w+)Request")


class _Requests:
    """In place of the clients' log (streaming.kafka.client_log), which drops repeated lines: every line kept."""

    def __init__(self) -> None:
        self.sent: list[str] = []

    def log(self, level: int, fmt: str, *args) -> None:
        if m := SENT.search(fmt % args if args else fmt):
            self.sent.append(m[1])


def setup(bootstrap: str, slot: int) -> tuple[list[str], float]:
    """The requests one emitter's set-up sent, in order, and its seconds."""
    requests = _Requests()
    client_log._LOG = requests
    t = time.perf_counter()
    emitter = TaskEmitter(bootstrap, f"kcompact-bench-{slot}", {"debug": "protocol"})
    seconds = time.perf_counter() - t
    emitter.producer.poll(0)  # the log lines of the set-up reach the logger as the client's queue is served
    sent = list(requests.sent)
    emitter.close()
    return sent, seconds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rtt-ms", type=int, default=50)
    ap.add_argument("--tasks", type=int, default=3, help="emitters made one after another, each a task's")
    args = ap.parse_args()
    link = Link(rtt_ms=args.rtt_ms)
    with tempfile.TemporaryDirectory(prefix="kcompact-bench-setup-") as work, wan_site(Path(work), link) as site:
        far = site.sink.bootstrap_servers  # through the link's proxy
        results = [setup(far, slot) for slot in range(args.tasks)]
    print(f"across {link.describe()}:")
    for slot, (sent, seconds) in enumerate(results):
        print(f"  task {slot}: {len(sent)} requests ({', '.join(sent)}), {seconds:.2f}s = "
              f"{seconds * 1000 / args.rtt_ms:.1f} round trips of time")
    print(f"median: {statistics.median(len(s) for s, _ in results)} requests, "
          f"{statistics.median(t for _, t in results):.2f}s")


if __name__ == "__main__":
    main()
