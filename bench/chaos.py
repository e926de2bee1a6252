"""A random fault campaign: the compactor mirroring a live three-node cluster while processes die and links
fail, one fault at a time, drawn from a seed.

    python bench/chaos.py --minutes 60 --seed 7 [--fault-s 60 --rate 200 --partitions 4 --keys 1000 --out DIR]

A producer writes at a steady rate into the source cluster (three nodes, replication 3, min ISR 2), around
the proxies. The job runs as an operator runs it (`kcompact run`, a process of its own) with group sync on,
its state dir on an S3 server, and every connection it makes (to each source node, to the sink broker, to
the S3 server) through a Toxiproxy proxy of its own. A consumer group of the source moves on as the
campaign goes, so the group sync always has work. Once the job has caught up with the source a first time
(a job still starting is not a fault's recovery), every 20 to 60 s a fault is drawn (Fault): the job
SIGKILLed or SIGTERMed and started again, a source node SIGKILLed and restarted after --fault-s, or one of
the network faults of tests/e2e/test_network_faults.py for --fault-s. After each heal the campaign waits
until the sink holds every winner of what the source held at the heal, and kcompact verify is clean: that
is the fault's recovery time, which must be within the fault's bound.

At the end the producer stops and the campaign checks that nothing is lost and nothing is twice (an
independent read of source and sink), that verify is clean, that the group's offsets on the sink are exactly
the translation of its last source offsets, and that the job printed no traceback. It prints a table of the
faults with their recovery times. The same seed draws the same faults in the same order; a run's length
decides how many of them it reaches.

tests/e2e/test_chaos.py runs 3 minutes with a fixed seed in CI, on the session's cluster and proxies.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Callable, ContextManager, Iterator

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]  # the soak's producer and tally; the tests' S3 server and Toxiproxy

from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient  # noqa: E402
from rich import box  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from bench_soak import SteadyProducer, Tally, read_all, tally_sink, verify_mirror  # noqa: E402
from streaming.brokers.broker import Broker  # noqa: E402
from streaming.brokers.choice import start_local_broker, start_local_cluster  # noqa: E402
from streaming.brokers.local.cluster import NODES, LocalCluster  # noqa: E402
from streaming.brokers.local.server import die_with_parent  # noqa: E402
from streaming.kafka.admin import Cluster, create_topic, unique_topic_name  # noqa: E402
from streaming.kafka.client_log import with_client_log  # noqa: E402
from streaming.kafka.sink.sink_progress import committed_progress  # noqa: E402
from streaming.kafka.headers.offset_header import source_offset  # noqa: E402
from streaming.partition_id import PartitionId  # noqa: E402
from tests.e2e.cluster import isr_full  # noqa: E402
from tests.e2e.helpers import commit_group_offsets, group_offsets, wait_for  # noqa: E402
from tests.minio import S3Server  # noqa: E402
from tests.toxiproxy import TOXIPROXY, Proxy, Toxic, Toxiproxy, in_front_of_nodes, toxic  # noqa: E402

# Short enough that a fault outlasts every client timeout, as a real outage outlasts the defaults (the
# network-fault tests' settings)
CLIENT_TIMEOUTS = ("socket.timeout.ms=8000", "socket.connection.setup.timeout.ms=5000", "request.timeout.ms=8000")
SOURCE_TIMEOUTS = (*CLIENT_TIMEOUTS, "session.timeout.ms=8000")
SINK_TIMEOUTS = (*CLIENT_TIMEOUTS, "transaction.timeout.ms=15000")
GAP_S = (20.0, 60.0)  # healthy time before each fault
GROUP_LAG = 50  # the source group trails the source's end by this many records a partition


class Fault(Enum):
    """What is done, and the bound on the time from its heal until the sink holds everything again: a job
    started anew needs its Spark session and its query first; a broker restarted, its leaders back."""

    JOB_SIGKILL = ("job SIGKILLed, started again", 20.0)
    JOB_SIGTERM = ("job SIGTERMed, started again", 20.0)
    BROKER_SIGKILL = ("source node SIGKILLed, restarted", 60.0)
    SINK_BLACKHOLE = ("sink cluster cut off (a blackhole)", 30.0)
    SOURCE_NODE_CUT = ("one source node cut off, alive for the others", 30.0)
    SOURCE_RESETS = ("source connections reset every 5 s", 30.0)
    SINK_THROTTLED = ("sink link at 1 Mbit/s", 30.0)
    LATENCY_SPIKE = ("500 ms more a round trip on every link", 30.0)
    STORE_OUTAGE = ("state store's S3 server cut off", 30.0)

    @property
    def says(self) -> str:
        return self.value[0]

    @property
    def bound_s(self) -> float:
        return self.value[1]

    @property
    def option(self) -> str:
        """Its name on the command line (--faults)."""
        return self.name.lower().replace("_", "-")


@dataclass(frozen=True)
class Draw:
    gap_s: float
    fault: Fault
    node: int  # the source node it acts on, where it acts on one


def draws(seed: int, kinds: tuple[Fault, ...] = tuple(Fault)) -> Iterator[Draw]:
    """The campaign of ``seed``: the same faults in the same order every time. Faults come out of a bag
    holding each of ``kinds`` once, shuffled, refilled when empty: every kind within each len(kinds) draws."""
    rng = random.Random(seed)
    bag: list[Fault] = []
    while True:
        if not bag:
            bag = list(kinds)
            rng.shuffle(bag)
        yield Draw(round(rng.uniform(*GAP_S), 1), bag.pop(), rng.randint(1, NODES))


@dataclass(frozen=True)
class Site:
    """What the campaign runs on: the source cluster and the sink broker, each node behind its proxy, and the
    S3 server the state dir lives on, behind its own."""

    cluster: Broker
    cluster_proxies: list[Proxy]
    sink: Broker
    sink_proxy: Proxy
    store: S3Server
    store_proxy: Proxy

    @property
    def nodes(self) -> LocalCluster:
        return self.cluster.cluster


@dataclass(frozen=True)
class Recovery:
    draw: Draw
    at_min: float
    lasted_s: float
    recovered_s: float
    verified: bool

    @property
    def within_bound(self) -> bool:
        return self.verified and self.recovered_s <= self.draw.fault.bound_s


@dataclass
class CampaignResult:
    seed: int
    recoveries: list[Recovery]
    tally: Tally
    group_exact: bool
    group_note: str
    tracebacks: int

    @property
    def ok(self) -> bool:
        return (self.tally.lost == 0 and self.tally.duplicated == 0 and self.tally.verified and self.group_exact
                and self.tracebacks == 0 and all(r.within_bound for r in self.recoveries))

    def table(self) -> Table:
        table = Table(title=f"kcompact fault campaign, seed {self.seed}", box=box.MARKDOWN)
        for head in ("#", "at min", "fault", "node", "lasted s", "recovered in s", "bound s", "verify"):
            table.add_column(head, justify="left" if head in ("fault", "verify") else "right")
        for i, r in enumerate(self.recoveries, 1):
            node = str(r.draw.node) if r.draw.fault in (Fault.BROKER_SIGKILL, Fault.SOURCE_NODE_CUT) else ""
            table.add_row(str(i), f"{r.at_min:.1f}", r.draw.fault.says, node, f"{r.lasted_s:.0f}",
                          f"{r.recovered_s:.1f}", f"{r.draw.fault.bound_s:.0f}",
                          "clean" if r.verified else "MISMATCHES")
        return table

    def lines(self) -> list[str]:
        t = self.tally
        return [f"faults: {len(self.recoveries)}, within their bound: {sum(r.within_bound for r in self.recoveries)}",
                f"records in: {t.records_in:,}; sink records: {t.sink_records:,}; lost: {t.lost}; "
                f"duplicated: {t.duplicated}; kcompact verify: {'clean' if t.verified else 'MISMATCHES'}",
                *(f"  {v.line()}" for v in t.verdicts),
                f"group offsets on the sink: {'exact' if self.group_exact else 'WRONG'} ({self.group_note})",
                f"tracebacks in the job's log: {self.tracebacks}",
                f"campaign: {'PASSED' if self.ok else 'FAILED'}"]


class Job:
    """`kcompact run` as a process of its own, started again after each death; every run writes to one log."""

    def __init__(self, command: list[str], log_path: Path) -> None:
        self.command, self.log_path = command, log_path
        self.proc = self._start()

    def _start(self) -> subprocess.Popen:
        with open(self.log_path, "ab") as log:  # the child keeps its own descriptor
            return subprocess.Popen(self.command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    preexec_fn=die_with_parent)  # gone with a campaign that is killed

    def ended(self) -> int | None:
        return self.proc.poll()

    def end(self, sig: signal.Signals, timeout_s: float = 120) -> int:
        self.proc.send_signal(sig)
        return self.proc.wait(timeout_s)

    def restart(self) -> None:
        self.proc = self._start()

    def kill(self) -> None:
        """SIGKILL, if it still runs (a campaign that failed leaves nothing behind)."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


class GroupMover(threading.Thread):
    """A consumer group of the source that reads on: its offsets, committed every few seconds, trail the
    source's end by GROUP_LAG, so every group sync round has something to carry."""

    def __init__(self, bootstrap: str, group: str, topic: str, partitions: int) -> None:
        super().__init__(daemon=True)
        self.bootstrap, self.group, self.topic, self.partitions = bootstrap, group, topic, partitions
        self.halt = threading.Event()

    def commit_now(self) -> dict[int, int]:
        ends = Cluster("source", self.bootstrap).end_offsets(
            [PartitionId(self.topic, p) for p in range(self.partitions)], timeout_s=30)
        wanted = {pid.partition: max(0, end - GROUP_LAG) for pid, end in ends.items()}
        request = ConsumerGroupTopicPartitions(self.group, [TopicPartition(self.topic, p, o) for p, o in wanted.items()])
        admin = AdminClient(with_client_log({"bootstrap.servers": self.bootstrap}))  # held until it answers; a new
        admin.alter_consumer_group_offsets([request])[self.group].result(30)       # one each time (admin.renew_admin)
        return wanted

    def run(self) -> None:
        while not self.halt.wait(5):
            with contextlib.suppress(Exception):  # a coordinator that is moving: the next round commits
                self.commit_now()


def _network(site: Site, fault: Fault, node: int) -> ContextManager[None]:
    """A network fault as Toxiproxy toxics."""
    everything = [*site.cluster_proxies, site.sink_proxy]
    return {
        Fault.SINK_BLACKHOLE: lambda: toxic([site.sink_proxy], Toxic.blackhole()),
        Fault.SOURCE_NODE_CUT: lambda: toxic([site.cluster_proxies[node - 1]], Toxic.blackhole()),
        Fault.SOURCE_RESETS: lambda: toxic(site.cluster_proxies, Toxic.reset_peer(5000)),
        Fault.SINK_THROTTLED: lambda: toxic([site.sink_proxy], Toxic.bandwidth(125)),
        Fault.LATENCY_SPIKE: lambda: toxic(everything, Toxic.latency(250)),
        Fault.STORE_OUTAGE: lambda: toxic([site.store_proxy], Toxic.blackhole()),
    }[fault]()


def _put_on(site: Site, job: Job, draw: Draw, fault_s: float) -> None:
    """Does the fault and heals it; returns at the heal."""
    if draw.fault in (Fault.JOB_SIGKILL, Fault.JOB_SIGTERM):
        code = job.end(signal.SIGKILL if draw.fault is Fault.JOB_SIGKILL else signal.SIGTERM)
        if draw.fault is Fault.JOB_SIGTERM and code != 0:
            raise RuntimeError(f"the job exited {code} on SIGTERM, not 0; see {job.log_path}")
        job.restart()
    elif draw.fault is Fault.BROKER_SIGKILL:
        site.nodes.kill(draw.node)
        time.sleep(fault_s)
        site.nodes.restart(draw.node)
    else:
        with _network(site, draw.fault, draw.node):
            time.sleep(fault_s)


def _caught_up(site: Site, sink: str, ends: dict[int, int]) -> bool:
    """The sink's progress has reached the last record the source held at the heal, in every partition."""
    config = {"bootstrap.servers": site.sink.server.direct_bootstrap_servers}
    try:
        progress = committed_progress(config, [PartitionId(sink, p) for p in ends])
        return all(end == 0 or progress[PartitionId(sink, p)] >= end - 1 for p, end in ends.items())
    except Exception:  # noqa: BLE001 (a sink whose topic the job has not made yet, a leader moving)
        return False


def _source_ends(source: Cluster, src: str, partitions: int) -> dict[int, int]:
    """Retried with a new client while leaders move, as after a node's restart (as verify reads them)."""
    of_source = [PartitionId(src, p) for p in range(partitions)]
    return {pid.partition: o for pid, o in
            source.answer(lambda: source.end_offsets(of_source, timeout_s=30), "end offsets of the source").items()}


def _catch_up(site: Site, job: Job, sink: str, ends: dict[int, int], limit_s: float, when: str) -> None:
    """Waits until the sink holds every winner of the source up to ``ends``. The bound of a recovery is judged
    by the caller; ``limit_s`` only ends a run whose job is stuck."""
    deadline = time.monotonic() + limit_s
    while not _caught_up(site, sink, ends):
        if time.monotonic() > deadline or job.ended() is not None:
            raise RuntimeError(f"the sink did not catch up {when} (job exit {job.ended()}); see {job.log_path}")
        time.sleep(0.5)


def _verified(site: Site, src: str, sink: str, partitions: int) -> bool:
    verdicts = verify_mirror(site.nodes.direct_bootstrap_servers, src, site.sink.server.direct_bootstrap_servers, sink)
    return len(verdicts) == partitions and all(v.ok for v in verdicts)


def _group_exact(site: Site, group: str, sink: str, partitions: int, source_offsets: dict[int, int],
                 wait_s: float = 60) -> tuple[bool, str]:
    """The group's sink offsets are the translation of its last source offsets: in each partition the first
    sink record whose source offset is at or past the group's (found here by reading the whole sink)."""
    direct = site.sink.server.direct_bootstrap_servers
    got = read_all(direct, sink, partitions)
    want = {p: next((m.offset() for m in got.get(p, []) if source_offset(m.headers()) >= o), None)
            for p, o in source_offsets.items()}
    deadline = time.monotonic() + wait_s
    while True:
        have = group_offsets(direct, group, sink, partitions)
        if have == want or time.monotonic() > deadline:
            return have == want, f"source {source_offsets}, sink {have}, translation {want}"
        time.sleep(1)


def campaign(site: Site, minutes: float, seed: int, work: Path, fault_s: float = 60, rate: int = 200,
             partitions: int = 4, keys: int = 1000, say: Callable[[str], None] = print,
             kinds: tuple[Fault, ...] = tuple(Fault)) -> CampaignResult:
    direct = site.nodes.direct_bootstrap_servers
    src = create_topic(direct, unique_topic_name("chaos"), partitions, {"retention.ms": "-1"})
    sink, group = unique_topic_name("chaos-sink"), unique_topic_name("chaos-readers")
    commit_group_offsets(direct, group, src, partitions, 0)
    bucket = site.store.new_bucket()
    command = [sys.executable, "-m", "streaming", "--log-level", "INFO", "run",
               "--bootstrap-servers", site.cluster.bootstrap_servers, "--source-topic", src,
               "--sink-bootstrap-servers", site.sink.bootstrap_servers, "--sink-topic", sink,
               "--state-dir", site.store.uri(bucket, endpoint=site.store_proxy.listen),
               "--checkpoint-location", str(work / "checkpoint"), "--trigger-interval", "1",
               "--config", "max.compaction.lag.ms=2000", "--config", "min.cleanable.dirty.ratio=0.2",
               "--sink-topic-config", "cleanup.policy=delete", "--sink-topic-config", "retention.ms=-1",
               "--sync-group-offsets", re.escape(group), "--sync-group-offsets-interval", "2", "--retry-timeout", "600",
               *(f for t in SOURCE_TIMEOUTS for f in ("--kafka", t)),
               *(f for t in SINK_TIMEOUTS for f in ("--sink-kafka", t))]
    producer = SteadyProducer(direct, src, partitions, keys, rate)
    mover = GroupMover(direct, group, src, partitions)
    producer.start()
    job = Job(command, work / "job.log")
    mover.start()
    try:
        recoveries = _faults(site, job, src, sink, partitions, minutes, draws(seed, kinds), fault_s, say)
        for thread in (mover, producer):
            thread.halt.set()
            thread.join()
        if producer.failures:
            raise RuntimeError(f"the producer failed: {producer.failures[:3]}")
        last_group = mover.commit_now()
        tally = tally_sink(direct, src, site.sink.server.direct_bootstrap_servers, sink, partitions, producer.produced)
        exact, note = _group_exact(site, group, sink, partitions, last_group)
        code = job.end(signal.SIGTERM, 300)
        if code != 0:
            raise RuntimeError(f"the job exited {code} on its last SIGTERM; see {job.log_path}")
        return CampaignResult(seed, recoveries, tally, exact, note, job.log().count("Traceback"))
    finally:
        mover.halt.set()
        producer.halt.set()
        job.kill()


def _faults(site: Site, job: Job, src: str, sink: str, partitions: int, minutes: float, drawn: Iterator[Draw],
            fault_s: float, say: Callable[[str], None]) -> list[Recovery]:
    """The drawn faults, one after another, each healed and recovered from, while the next one fits."""
    direct = site.nodes.direct_bootstrap_servers
    source = Cluster("source", direct)  # one client for every read of the ends

    def written() -> dict[int, int] | None:
        ends = _source_ends(source, src, partitions)
        return ends if all(ends.values()) else None
    _catch_up(site, job, sink, wait_for(written, 60, "the producer's first records in every source partition"), 300,
              "once the job started")
    say("the job caught up with the source; the faults begin")
    started = time.monotonic()
    recoveries: list[Recovery] = []
    for draw in drawn:
        if time.monotonic() + draw.gap_s + fault_s - started > minutes * 60:
            return recoveries
        time.sleep(draw.gap_s)
        if job.ended() is not None:
            raise RuntimeError(f"the job exited {job.ended()} outside a fault; see {job.log_path}")
        at_min, began = (time.monotonic() - started) / 60, time.monotonic()
        say(f"{at_min:5.1f} min: {draw.fault.says}" + (f" (node {draw.node})" if draw.fault in (
            Fault.BROKER_SIGKILL, Fault.SOURCE_NODE_CUT) else ""))
        _put_on(site, job, draw, fault_s)
        healed = time.monotonic()
        _catch_up(site, job, sink, _source_ends(source, src, partitions), max(draw.fault.bound_s * 4, 240),
                  f"after {draw.fault.says}")
        recovered = time.monotonic() - healed
        recoveries.append(Recovery(draw, at_min, healed - began, recovered, _verified(site, src, sink, partitions)))
        say(f"        recovered in {recovered:.1f} s (bound {draw.fault.bound_s:.0f} s), "
            f"verify {'clean' if recoveries[-1].verified else 'MISMATCHES'}")
        while not isr_full(direct):  # the next fault starts on a whole cluster
            time.sleep(1)
    return recoveries


@contextlib.contextmanager
def own_site(work: Path) -> Iterator[Site]:
    """A site of the campaign's own, every process stopped by PID when it ends."""
    server = Toxiproxy(TOXIPROXY.ensure(), work / "toxiproxy.log")
    try:
        proxied, cluster_proxies = in_front_of_nodes(server, NODES, "cluster")
        sink_proxied, sink_proxies = in_front_of_nodes(server, 1, "sink")
        store = S3Server(work / "minio")
        try:
            store_proxy = server.proxy("store", store.endpoint)
            with start_local_cluster(proxied=proxied) as cluster:
                sink = start_local_broker(data_dir=work / "sink-broker", proxied=sink_proxied[0])
                try:
                    yield Site(cluster, cluster_proxies, sink, sink_proxies[0], store, store_proxy)
                finally:
                    sink.stop()
        finally:
            store.stop()
    finally:
        server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=60)
    parser.add_argument("--seed", type=int, default=None, help="draws the campaign (default: a new one, printed)")
    parser.add_argument("--fault-s", type=float, default=60, help="how long a network fault or a node's death lasts")
    parser.add_argument("--rate", type=int, default=200, help="records a second")
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--keys", type=int, default=1000)
    parser.add_argument("--out", type=Path, default=None, help="where the job's log goes (default: a temporary dir)")
    parser.add_argument("--faults", default=",".join(f.option for f in Fault),
                        help="the kinds drawn, comma-separated (default: every kind): " + ", ".join(f.option for f in Fault))
    args = parser.parse_args()
    by_option = {f.option: f for f in Fault}
    unknown = [k for k in args.faults.split(",") if k not in by_option]
    if unknown:
        parser.error(f"--faults: no kind {', '.join(unknown)}; the kinds: {', '.join(by_option)}")
    kinds = tuple(by_option[k] for k in args.faults.split(","))
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # the site's processes stopped on the way out
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1 << 31)
    work = args.out or Path(tempfile.mkdtemp(prefix="kcompact-chaos-"))
    work.mkdir(parents=True, exist_ok=True)
    print(f"campaign of seed {seed}, {args.minutes:g} minutes; the job's log: {work / 'job.log'}", flush=True)
    with own_site(work) as site:
        result = campaign(site, args.minutes, seed, work, args.fault_s, args.rate, args.partitions, args.keys,
                          say=lambda line: print(line, flush=True), kinds=kinds)
    Console(width=160).print(result.table())
    for line in result.lines():
        print(line)
    sys.exit(0 if result.ok else 1)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
