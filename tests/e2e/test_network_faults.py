"""Network faults, not process faults: the link between the job and a cluster fails while every broker
stays up for everyone else.

The session's three-node cluster is the source; a broker of the module's own is the sink cluster, so the
job can be cut off from one and not the other. Every connection the job makes to a node goes through the
node's Toxiproxy proxy; the producer and the checks go around it (the brokers' own listener). The clients'
timeouts are short, so a fault of FAULT_S outlasts them, as a real outage outlasts the defaults.

Each test: a producer writes and a continuous job with group sync runs; the fault is put on; where the job
must wait, it says what it waits on and since when (Fault); the fault heals and every winner is in the sink within CATCH_UP_S; the
fault is put on again and Ctrl-C stops the job within 10 s with exit status 130; kcompact verify and the sink
contract find nothing lost and nothing twice, and the job printed no traceback.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, ContextManager

import pytest

from streaming.brokers.local.cluster import LocalCluster
from streaming.cli.main import main
from streaming.kafka.admin import create_topic, unique_topic_name
from tests.e2e.cluster import leader
from tests.e2e.conftest import SinkSite
from tests.e2e.helpers import JobProgress, assert_sink_contract, commit_group_offsets, sink_caught_up, wait_for
from tests.e2e.running_job import RunningJob
from tests.kafka_helpers import ChangeProducer
from tests.minio import S3Server
from tests.toxiproxy import Toxic, Toxiproxy, toxic

pytestmark = [pytest.mark.integration, pytest.mark.slow]

PARTITIONS = 2
FAULT_S = 20.0
CATCH_UP_S = 30.0
CTRL_C_S = 10.0
CONFIG = ("max.compaction.lag.ms=1000", "min.cleanable.dirty.ratio=0.1")
# Short enough that a fault of FAULT_S outlasts every client timeout, as a real outage outlasts the defaults
CLIENT_TIMEOUTS = ("socket.timeout.ms=8000", "socket.connection.setup.timeout.ms=5000", "request.timeout.ms=8000")
SOURCE_TIMEOUTS = (*CLIENT_TIMEOUTS, "session.timeout.ms=8000")
SINK_TIMEOUTS = (*CLIENT_TIMEOUTS, "transaction.timeout.ms=15000")
# What the job waits on, and since when: a task's retries, the driver's line per stage, the group sync's
WAITING = re.compile(r"WARNING .*waiting.* since \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC")


@dataclass(frozen=True)
class Fault:
    """What the test does to the network, and when the job must say what it waits on while it lasts: a
    slower link (latency, a bandwidth cap) keeps the job going, only slower, so there is nothing to say."""

    put_on: Callable[[str], ContextManager[None]]  # given the source topic
    said_while_writing: bool = False  # while the producer writes
    said_while_idle: bool = False     # once it stopped (the group sync's rounds still meet the fault)


def _drill(cluster: LocalCluster, sink_site: SinkSite, tmp_path: Path, fault: Fault, state_dir: str | None = None,
           extra: tuple[str, ...] = ()) -> None:
    """``state_dir``: the job's (a local directory under ``tmp_path`` if None)."""
    direct = cluster.direct_bootstrap_servers
    sink_direct = sink_site.broker.server.direct_bootstrap_servers
    src = create_topic(direct, unique_topic_name("net"), PARTITIONS, {"retention.ms": "-1"})
    sink = unique_topic_name("sink")
    group = unique_topic_name("reader")
    commit_group_offsets(direct, group, src, PARTITIONS, 0)  # the group sync has work on every interval
    settings = [f for t in SOURCE_TIMEOUTS for f in ("--kafka", t)] + [f for t in SINK_TIMEOUTS for f in ("--sink-kafka", t)]
    job_args = ("--sink-bootstrap-servers", sink_site.broker.bootstrap_servers, *settings,
                "--sync-group-offsets", re.escape(group), "--sync-group-offsets-interval", "2",
                "--retry-timeout", "600", *extra)

    def started() -> RunningJob:
        return RunningJob(cluster.bootstrap_servers, src, sink, tmp_path, *CONFIG, extra=job_args, state_dir=state_dir)

    with ChangeProducer(direct, src, PARTITIONS, keys=300, batch=50, pause_s=0.2, timeout_s=300,
                        tombstone_every=11) as producer, started() as job:

        def says_what_it_waits_on(since: int) -> None:
            wait_for(lambda: job.running() or WAITING.search(job.log()[since:]), FAULT_S * 3,
                     "the job says what it waits on", pause_s=0.2)

        job.progressed_beyond(JobProgress(0, 0))
        before = len(job.log())
        with fault.put_on(src):
            began = time.monotonic()
            if fault.said_while_writing:
                says_what_it_waits_on(before)
            time.sleep(max(0.0, FAULT_S - (time.monotonic() - began)))
        healed = time.monotonic()
        sent = producer.stop()
        wait_for(lambda: job.running() or sink_caught_up(sink_direct, sink, sent, PARTITIONS), CATCH_UP_S + 60,
                 "every winner in the sink after the heal", pause_s=0.5)
        caught_up_s = time.monotonic() - healed
        before = len(job.log())
        with fault.put_on(src):
            if fault.said_while_idle:
                says_what_it_waits_on(before)
            code, took_s = job.interrupt()
        log = job.log()
    print(f"every winner in the sink {caught_up_s:.1f}s after the heal; Ctrl-C during the fault took {took_s:.1f}s")
    assert "Traceback" not in log, log[-6000:]
    assert code == 130 and took_s <= CTRL_C_S, (code, took_s, log[-4000:])
    assert caught_up_s <= CATCH_UP_S, f"{caught_up_s:.1f}s after the heal"
    assert_sink_contract(sink_direct, sink, sent, PARTITIONS)
    assert main(["verify", "--bootstrap-servers", direct, "--source-topic", src, "--sink-topic", sink,
                 "--sink-bootstrap-servers", sink_direct]) == 0


def test_the_job_cut_off_from_the_sink_cluster(cluster, sink_site, tmp_path) -> None:
    """(a) A blackhole between the job and the sink: nothing passes, nothing is closed."""
    _drill(cluster, sink_site, tmp_path, Fault(lambda _src: toxic([sink_site.proxy], Toxic.blackhole()),
                                               said_while_writing=True, said_while_idle=True))


def test_the_job_cut_off_from_one_source_broker_alive_for_everyone_else(cluster, cluster_proxies, sink_site,
                                                                        tmp_path) -> None:
    """(b) The node leading a source partition stays in the cluster; only the job cannot reach it."""
    proxies = cluster_proxies[1]

    def cut_off(src: str) -> ContextManager[None]:
        node = leader(cluster.direct_bootstrap_servers, src, 0)
        return toxic([proxies[node - 1]], Toxic.blackhole())
    _drill(cluster, sink_site, tmp_path, Fault(cut_off, said_while_writing=True))


def test_connections_to_the_source_reset_every_five_seconds(cluster, cluster_proxies, sink_site, tmp_path) -> None:
    """(c) Every connection to a source node is reset 5 s after it carries data, again and again."""
    _drill(cluster, sink_site, tmp_path,
           Fault(lambda _src: toxic(cluster_proxies[1], Toxic.reset_peer(5000)), said_while_writing=True))


def test_the_sink_link_throttled_to_one_megabit(cluster, sink_site, tmp_path) -> None:
    """(d) 1 Mbit/s (125 KB/s) each way between the job and the sink."""
    _drill(cluster, sink_site, tmp_path, Fault(lambda _src: toxic([sink_site.proxy], Toxic.bandwidth(125))))


def test_a_half_second_latency_spike_on_every_link(cluster, cluster_proxies, sink_site, tmp_path) -> None:
    """(e) 500 ms more each way on every connection the job has, to the source and to the sink."""
    _drill(cluster, sink_site, tmp_path,
           Fault(lambda _src: toxic([*cluster_proxies[1], sink_site.proxy], Toxic.latency(250))))


def test_the_state_stores_object_store_unreachable(cluster, sink_site, s3_server: S3Server, toxiproxy: Toxiproxy,
                                                   tmp_path) -> None:
    """(f) The S3 server the state dir lives on stops answering: the job says which call waits on the store
    (streaming.log.store_watch)."""
    proxy = toxiproxy.proxy(unique_topic_name("s3"), s3_server.endpoint)
    bucket = s3_server.new_bucket()
    state = s3_server.uri(bucket, endpoint=proxy.listen)
    _drill(cluster, sink_site, tmp_path, Fault(lambda _src: toxic([proxy], Toxic.blackhole()), said_while_writing=True),
           state_dir=state, extra=("--checkpoint-location", str(tmp_path / "checkpoint")))
