"""Failover on a live three-node Apache Kafka cluster (KRaft, replication 3, min.insync.replicas 2, the
transaction state log too), while a producer writes throughout and the compactor runs continuously.

Each test injects one fault the way it happens to a real cluster, waits for the job to go on, and checks the
result by an independent read of source and sink (tests.e2e.helpers.assert_sink_contract): every key's last
sink record is its winner in the source (tombstones included), every record of a key written once arrived,
no kcompact.offset twice in a partition, offsets increasing.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time

import pytest

from streaming.brokers.broker import Broker
from streaming.brokers.local.cluster import LocalCluster
from streaming.kafka.admin import create_topic, unique_topic_name
from tests.e2e.cluster import group_coordinator, isr_full, leader, transaction_coordinator
from tests.e2e.helpers import (JobProgress, assert_sink_contract, commit_group_offsets, first_transactional_id,
                               load_bench, sink_caught_up, wait_for)
from tests.e2e.running_job import RunningJob
from tests.kafka_helpers import ChangeProducer

pytestmark = [pytest.mark.integration, pytest.mark.slow]

PARTITIONS = 2
CONFIG = ("max.compaction.lag.ms=1000", "min.cleanable.dirty.ratio=0.1")


def _run(cluster: LocalCluster, tmp_path, fault) -> None:
    """A producer and the job running; ``fault(job, sink)`` once both made progress; then every winner in the
    sink, the job stopped as an operator stops it, and the contract checked."""
    bootstrap = cluster.bootstrap_servers
    src = create_topic(bootstrap, unique_topic_name("failover"), PARTITIONS, {"retention.ms": "-1"})
    sink = unique_topic_name("sink")
    with ChangeProducer(bootstrap, src, PARTITIONS, keys=300, batch=50, pause_s=0.2, timeout_s=300,
                        tombstone_every=11) as producer, RunningJob(bootstrap, src, sink, tmp_path, *CONFIG) as job:
        mark = job.progressed_beyond(JobProgress(0, 0))
        fault(job, sink)
        job.progressed_beyond(mark)
        sent = producer.stop()
        time.sleep(1.2)  # every record older than max.compaction.lag.ms
        wait_for(lambda: job.running() or sink_caught_up(bootstrap, sink, sent, PARTITIONS), 240,
                 "every winner in the sink")
        job.stop()
    assert_sink_contract(bootstrap, sink, sent, PARTITIONS)


def test_the_leader_of_a_sink_partition_killed_mid_emit(cluster: LocalCluster, tmp_path) -> None:
    def fault(job: RunningJob, sink: str) -> None:
        job.phase_begins("emit")
        node = leader(cluster.bootstrap_servers, sink, 0)
        cluster.kill(node)
        job.progressed_beyond(job.progress())  # on two nodes
        cluster.restart(node)
    _run(cluster, tmp_path, fault)


def test_a_rolling_restart_of_all_three_brokers(cluster: LocalCluster, tmp_path) -> None:
    def fault(job: RunningJob, sink: str) -> None:
        for node in (1, 2, 3):
            cluster.terminate(node)
            cluster.restart(node)
            wait_for(lambda: job.running() or isr_full(cluster.bootstrap_servers), 180, f"node {node}'s ISR full")
    _run(cluster, tmp_path, fault)


def test_the_transaction_coordinator_killed_mid_transaction(cluster: LocalCluster, tmp_path) -> None:
    def fault(job: RunningJob, sink: str) -> None:
        node = transaction_coordinator(cluster.bootstrap_servers, first_transactional_id(job.state_dir))
        job.phase_begins("emit")
        cluster.kill(node)
        job.progressed_beyond(job.progress())
        cluster.restart(node)
    _run(cluster, tmp_path, fault)


def test_a_broker_frozen_past_the_session_and_request_timeouts(cluster: LocalCluster, tmp_path) -> None:
    def fault(job: RunningJob, sink: str) -> None:
        node = leader(cluster.bootstrap_servers, sink, 0)
        cluster.freeze(node)
        time.sleep(35)  # the freeze: past broker.session.timeout.ms (9 s) and request.timeout.ms (30 s)
        cluster.thaw(node)
    _run(cluster, tmp_path, fault)


def test_two_brokers_down_the_job_waits_says_why_and_resumes(cluster: LocalCluster, tmp_path) -> None:
    """Below min.insync.replicas nothing can be written: the job waits, one line per trigger says why, and it
    goes on when the brokers return."""
    def fault(job: RunningJob, sink: str) -> None:
        before = len(job.log())
        down = [n for n in (1, 2, 3) if n != leader(cluster.bootstrap_servers, sink, 0)]
        for node in down:
            cluster.kill(node)

        # The outage lasts until the job has said why it waits. The two nodes are two of the three controllers
        # too: the quorum is gone, so the metadata (the ISR) does not change meanwhile.
        def said_why() -> bool:
            job.running()
            return any(re.search(r"WARNING .*waiting for the (sink|source) cluster", line)
                       for line in job.lines_since(before))
        try:
            wait_for(said_why, 120, "the job saying why it waits")
        except AssertionError as exc:
            raise AssertionError(f"{exc}: " + "\n".join(job.lines_since(before)[-40:])) from None
        for node in down:
            cluster.restart(node)
        lines = job.lines_since(before)
        assert not [line for line in lines if "Traceback" in line], "no stack, one line per interval"
    _run(cluster, tmp_path, fault)


def test_the_active_controller_killed(cluster: LocalCluster, tmp_path) -> None:
    def fault(job: RunningJob, sink: str) -> None:
        node = cluster.quorum_leader()
        assert node is not None
        cluster.kill(node)
        wait_for(lambda: job.running() or (cluster.quorum_leader() not in (None, node)), 60, "a new active controller")
        job.progressed_beyond(job.progress())
        cluster.restart(node)
    _run(cluster, tmp_path, fault)


READ_OFFSETS_IN_A_LOOP = """
import os, sys, time
from confluent_kafka import TopicPartition
from streaming.kafka.clients import committed_offsets
bootstrap, group, topic, done = sys.argv[1:5]
reads = 0
while not os.path.exists(done):
    try:
        committed_offsets({"bootstrap.servers": bootstrap, "log_level": 0}, group, [TopicPartition(topic, 0)], 10)
        reads += 1
    except Exception:
        pass
    time.sleep(0.02)
print(reads)
"""


def test_a_groups_offsets_are_read_through_its_coordinator_moving(cluster: LocalCluster, tmp_path) -> None:
    """The group sync's read of a group's offsets, in a loop while the group's coordinator is shut down and
    started again twice. Through the admin API (ListConsumerGroupOffsets) the same loop died of SIGSEGV at
    the first move (librdkafka 2.16 dereferences a NULL consumer group on NOT_COORDINATOR, issue 5040): the
    fault campaign's job died so twice. Run in a process of its own, so such a crash fails the test, not
    the session."""
    bootstrap = cluster.direct_bootstrap_servers
    topic = create_topic(bootstrap, unique_topic_name("coord"), 1, {})
    group = unique_topic_name("readers")
    commit_group_offsets(bootstrap, group, topic, 1, 0)
    done = tmp_path / "done"
    reader = subprocess.Popen([sys.executable, "-c", READ_OFFSETS_IN_A_LOOP, bootstrap, group, topic, str(done)],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        for _ in range(2):
            node = group_coordinator(bootstrap, group)
            cluster.terminate(node)
            cluster.restart(node)
            wait_for(lambda: reader.poll() is not None or isr_full(bootstrap), 120, "every ISR full again")
    finally:
        done.touch()
        out, _ = reader.communicate(timeout=120)
    assert reader.returncode == 0, f"the reader died: exit {reader.returncode}"
    assert int(out) > 0


def test_a_short_soak_loses_and_duplicates_nothing(cluster: LocalCluster, cluster_broker: Broker, tmp_path) -> None:
    """bench/bench_soak.py for 2 minutes (the hour-long soak is bench/'s): a steady produce rate, a broker
    restarted every 45 s and the compactor SIGKILLed twice. The figures are printed; lost and duplicated must be
    0 and kcompact verify clean; memory is sampled per process into a CSV and a plot."""
    soak = load_bench("bench_soak")
    result = soak.soak(cluster_broker, minutes=2, rate=250, partitions=2, keys=500, restart_every_s=45, kills=2,
                       work=tmp_path, sample_every_s=30)
    print("\n".join(result.lines()))
    assert (result.lost, result.duplicated) == (0, 0), result.lines()
    assert result.verified and len(result.verify_lines) == 2, result.lines()
    assert result.broker_restarts >= 2 and result.compactor_kills == 2
    assert result.sink_records > 0 and result.records_in > 20_000
    roles = {s.process.rsplit(" ", 1)[0] for s in result.memory.samples}
    assert {"driver", "driver JVM", "python worker", "broker node 1", "broker node 2", "broker node 3"} <= roles, roles
    assert (tmp_path / "memory.png").stat().st_size > 0 and len(result.memory.objects) >= 4
