"""A node SIGKILLed at each named moment of the job (streaming.runtime.moments), on the three-node cluster, with a
producer writing throughout.

The job is held at the moment (KCOMPACT_HOLD_AT), the node that moment depends on is killed, and the job is
let go: its next call meets the cluster as the fault left it, a leader that died and a client whose metadata
still names it. The running job (no later --once) must then read everything written and emit every winner
within 30 s of the new leader's election, stop on Ctrl-C within 10 s with 130, print no traceback, and leave a
sink that kcompact verify and the sink contract both pass.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pytest
from confluent_kafka import KafkaException

from streaming.brokers.local.cluster import LocalCluster
from streaming.cli.main import main
from streaming.kafka.admin import create_topic, unique_topic_name
from streaming.runtime.moments import HOLD_ENV, REACHED, RELEASE, Moment
from tests.e2e.cluster import group_coordinator, leader, transaction_coordinator
from tests.e2e.helpers import (JobProgress, assert_sink_contract, commit_group_offsets, group_offsets, sink_caught_up,
                               wait_for)
from tests.e2e.running_job import RunningJob
from tests.kafka_helpers import ChangeProducer, Sent, produce

pytestmark = [pytest.mark.integration, pytest.mark.slow]

PARTITIONS = 2
CONFIG = ("max.compaction.lag.ms=1000", "min.cleanable.dirty.ratio=0.1")
CATCH_UP_S = 30.0  # from the new leader's election to every winner in the sink
STOP_S = 10.0
GROUP = "failover-readers"
PROGRESS = re.compile(r"progress: .* lag ([-\d,]+), .*; (.*)$")  # the job's progress line: its lag and what it does
BACKLOG = 24_000  # records a partition holds before the job starts: its first read takes several fetches


@dataclass(frozen=True)
class Fault:
    """Which node a moment depends on, given where the job was held (a partition, a batch, a group)."""

    moment: Moment
    victim: Callable[[str, "Topics", str], tuple[int, Callable[[], bool]]]


@dataclass(frozen=True)
class Topics:
    source: str
    sink: str


def _partition(where: str) -> int:
    """The partition number in 'topic-3' or 'topic-3 at offset 10'; 0 when the place names none."""
    head = where.split()[0]
    return int(head.rsplit("-", 1)[1]) if "-" in head and head.rsplit("-", 1)[1].isdigit() else 0


def _moved(now: Callable[[], int], node: int) -> Callable[[], bool]:
    """Whether another node than ``node`` does the job now. While the cluster elects, a metadata request can
    time out or name no leader: not yet."""
    def moved() -> bool:
        try:
            return now() not in (-1, node)
        except (KafkaException, KeyError):
            return False
    return moved


def _leader_of(topic_of: Callable[[Topics], str]):
    def victim(bootstrap: str, topics: Topics, where: str) -> tuple[int, Callable[[], bool]]:
        topic, p = topic_of(topics), _partition(where)
        node = leader(bootstrap, topic, p)
        return node, _moved(lambda: leader(bootstrap, topic, p), node)
    return victim


def _coordinator(bootstrap: str, topics: Topics, where: str) -> tuple[int, Callable[[], bool]]:
    txn_id = where.split()[0]  # a task's transactional id: its emitter holds there
    node = transaction_coordinator(bootstrap, txn_id)
    return node, _moved(lambda: transaction_coordinator(bootstrap, txn_id), node)


def _group_coordinator(bootstrap: str, topics: Topics, where: str) -> tuple[int, Callable[[], bool]]:
    node = group_coordinator(bootstrap, where)
    return node, _moved(lambda: group_coordinator(bootstrap, where), node)


SOURCE_LEADER = _leader_of(lambda t: t.source)
SINK_LEADER = _leader_of(lambda t: t.sink)
FAULTS = [
    Fault(Moment.FIRST_BATCH, SOURCE_LEADER),
    Fault(Moment.LOG_START, SOURCE_LEADER),
    Fault(Moment.FETCH, SOURCE_LEADER),
    Fault(Moment.APPEND, SOURCE_LEADER),
    Fault(Moment.BEFORE_CLEAN, SINK_LEADER),
    Fault(Moment.INIT_TRANSACTIONS, _coordinator),
    Fault(Moment.FLUSH, SINK_LEADER),
    Fault(Moment.COMMIT, _coordinator),
    Fault(Moment.GROUP_SYNC_COMMIT, _group_coordinator),
]


def _held(hold: Path, job: RunningJob, timeout_s: float = 180) -> str:
    """Wait until the job holds at its moment; where it holds."""
    def reached() -> str | None:
        job.running()
        return (hold / REACHED).read_text() if (hold / REACHED).exists() and (hold / REACHED).stat().st_size else None
    return wait_for(reached, timeout_s, f"the job to reach {hold.name}", pause_s=0.05)


def _verify(bootstrap: str, topics: Topics) -> None:
    assert main(["verify", "--bootstrap-servers", bootstrap, "--source-topic", topics.source,
                 "--sink-topic", topics.sink]) == 0


@pytest.mark.parametrize("fault", FAULTS, ids=[f.moment.value for f in FAULTS])
def test_a_node_killed_at_the_moment(fault: Fault, cluster: LocalCluster, tmp_path: Path) -> None:
    bootstrap = cluster.bootstrap_servers
    topics = Topics(create_topic(bootstrap, unique_topic_name("moment"), PARTITIONS, {"retention.ms": "-1"}),
                    unique_topic_name("sink"))
    backlog = []
    if fault.moment is Moment.FETCH:
        now = int(time.time() * 1000)
        backlog = produce(bootstrap, topics.source, [Sent(i % PARTITIONS, b"backlog-%d" % (i % 5000), b"b%d" % i, now)
                                                     for i in range(BACKLOG * PARTITIONS)], timeout_s=120)
    group_sync = fault.moment is Moment.GROUP_SYNC_COMMIT
    extra = ("--sync-group-offsets", GROUP, "--sync-group-offsets-interval", "2") if group_sync else ()
    hold = tmp_path / fault.moment.value
    hold.mkdir()
    with ChangeProducer(bootstrap, topics.source, PARTITIONS, keys=300, batch=50, pause_s=0.2, timeout_s=300,
                        tombstone_every=11) as producer, \
            RunningJob(bootstrap, topics.source, topics.sink, tmp_path, *CONFIG, extra=extra,
                       env={HOLD_ENV: f"{fault.moment.value}:{hold}"}) as job:
        if group_sync:  # the group gets offsets to carry once the job runs: its first commit is not the job's start
            job.progressed_beyond(JobProgress(0, 0))
            commit_group_offsets(bootstrap, GROUP, topics.source, PARTITIONS, 100)
        where = _held(hold, job)
        node, elected = fault.victim(bootstrap, topics, where)
        cluster.kill(node)
        (hold / RELEASE).touch()
        wait_for(elected, 60, f"a new leader in place of node {node}", pause_s=0.2)
        election = time.monotonic()
        sent = producer.stop()
        wait_for(lambda: job.running() or sink_caught_up(bootstrap, topics.sink, backlog + sent, PARTITIONS),
                 CATCH_UP_S, "every winner in the sink within 30 s of the election", pause_s=0.5)
        caught_up_s = time.monotonic() - election
        if group_sync:
            wait_for(lambda: job.running() or len(group_offsets(bootstrap, GROUP, topics.sink, PARTITIONS)) == PARTITIONS,
                     CATCH_UP_S,
                     "the group's offsets committed on the sink")
        code, took = job.interrupt()
        log = job.log()
    print(f"{fault.moment.value}: node {node} killed at {where}; caught up {caught_up_s:.1f}s after the election; "
          f"Ctrl-C took {took:.1f}s")
    assert code == 130 and took <= STOP_S, (code, took, log[-3000:])
    assert "Traceback" not in log, log[-6000:]
    if group_sync:  # the round waits out the coordinator's move and says nothing
        assert not [line for line in log.splitlines() if " WARNING streaming.job.group_sync:" in line or
                    " WARNING streaming.kafka.failures: waiting for the sink cluster: the commit" in line], log[-6000:]
    idle_with_records = [line for line in log.splitlines()
                         if (m := PROGRESS.search(line)) and m[1] not in ("-", "0") and m[2] == "waiting for records"]
    assert not idle_with_records, idle_with_records[:3]
    assert_sink_contract(bootstrap, topics.sink, backlog + sent, PARTITIONS)
    _verify(bootstrap, topics)


def test_ctrl_c_while_a_call_waits_on_a_dead_leader_stops_in_time_and_loses_nothing(cluster: LocalCluster,
                                                                                   tmp_path: Path) -> None:
    """Ctrl-C during the fault, before any leader is elected: the first stops the job within 10 s, a second
    at once; a job started after it, with every node back, reads and emits everything."""
    bootstrap = cluster.bootstrap_servers
    topics = Topics(create_topic(bootstrap, unique_topic_name("moment"), PARTITIONS, {"retention.ms": "-1"}),
                    unique_topic_name("sink"))
    with ChangeProducer(bootstrap, topics.source, PARTITIONS, keys=300, batch=50, pause_s=0.2, timeout_s=300,
                        tombstone_every=11) as producer:
        for moment, victim, second in ((Moment.LOG_START, SOURCE_LEADER, False), (Moment.COMMIT, _coordinator, True)):
            hold = tmp_path / moment.value
            hold.mkdir()
            with RunningJob(bootstrap, topics.source, topics.sink, tmp_path, *CONFIG,
                            env={HOLD_ENV: f"{moment.value}:{hold}"}) as job:
                node, _ = victim(bootstrap, topics, _held(hold, job))
                cluster.kill(node)
                (hold / RELEASE).touch()
                if second:
                    job.process.send_signal(2)
                    time.sleep(0.5)
                code, took = job.interrupt()
                log = job.log()
            assert code == 130 and took <= (1.0 if second else STOP_S), (moment, code, took, log[-3000:])
            assert "Traceback" not in log, log[-6000:]
            if second:
                assert log.rstrip().splitlines()[-1] == ("kcompact: stopped at once; the next start reads the "
                                                         "interrupted batch again"), log[-2000:]
            cluster.restart(node)
        with RunningJob(bootstrap, topics.source, topics.sink, tmp_path, *CONFIG) as job:
            time.sleep(2)
            sent = producer.stop()
            wait_for(lambda: job.running() or sink_caught_up(bootstrap, topics.sink, sent, PARTITIONS), 120,
                     "every winner in the sink")
            code, _ = job.interrupt()
    assert code == 130
    assert_sink_contract(bootstrap, topics.sink, sent, PARTITIONS)
    _verify(bootstrap, topics)
