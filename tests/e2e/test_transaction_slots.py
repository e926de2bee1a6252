"""Drills of the one-transaction-per-task design (docs/sink.md, the transactions): every id that may have written a
partition is fenced before the partition's next writer reads where to resume.

- A task's producer killed mid-transaction (its Python worker SIGKILLed while it holds at the flush), and the
  partition it was writing in another task, with another id, at the next stage: the driver fences the job's
  ids first, so the new writer finds no transaction open and emits from what the sink committed.
- The job shrinks between runs (fewer cores, so fewer tasks) while a transaction of a slot it no longer runs
  is open: the highest slot count is kept with the job, and the new run fences that slot's id too.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import time
from pathlib import Path

import pytest
from confluent_kafka import Producer

from streaming.kafka.admin import unique_topic_name
from streaming.kafka.clients import read_committed
from streaming.kafka.headers.offset_header import OFFSET_HEADER
from streaming.kafka.sink.transactional_ids import transactional_id
from streaming.runtime.moments import HOLD_ENV, HOLDER, REACHED, RELEASE, Moment
from tests.cli.test_first_contact import kcompact
from tests.e2e.helpers import COMPACTED_SINK, assert_sink_contract, run_once, sink_caught_up, wait_for
from tests.e2e.running_job import RunningJob
from tests.kafka_helpers import Sent, produce

pytestmark = [pytest.mark.integration, pytest.mark.slow]

HOUR = 3_600_000
CONFIG = ("max.compaction.lag.ms=1000", "min.cleanable.dirty.ratio=0.1")


def _past() -> int:
    return int(time.time() * 1000) - 2 * HOUR


def _job_id(state_dir: str) -> str:
    return json.loads((Path(state_dir) / "kcompact.json").read_text())["job_id"]


def test_a_partition_moved_to_another_task_after_its_writer_was_killed_mid_transaction(
        bootstrap_servers, new_topic, tmp_path) -> None:
    src, sink = new_topic(partitions=2), unique_topic_name("sink")
    hold = tmp_path / "hold"
    hold.mkdir()
    sent = produce(bootstrap_servers, src, [Sent(0, b"k%d" % (i % 30), b"a%d" % i, _past() + i) for i in range(300)])
    with RunningJob(bootstrap_servers, src, sink, tmp_path, *CONFIG,
                    env={HOLD_ENV: f"{Moment.FLUSH.value}:{hold}"}) as job:
        where = wait_for(lambda: job.running() or ((hold / REACHED).exists() and (hold / REACHED).read_text()), 180,
                         "a task held at its flush")
        tid = transactional_id(_job_id(job.state_dir), 0)
        assert where.startswith(f"{sink}-0 in {tid} "), where  # partition 0 alone: slot 0's task
        # the next micro-batch makes partition 1 outweigh partition 0: at the stage after it partition 1 is slot
        # 0's, and partition 0 slot 1's
        sent += produce(bootstrap_servers, src, [Sent(1, b"k%d" % (i % 30), b"b%d" % i, _past() + i)
                                                 for i in range(3000)])
        sent += produce(bootstrap_servers, src, [Sent(0, b"k%d" % (i % 30), b"c%d" % i, _past() + i)
                                                 for i in range(20)])
        os.kill(int((hold / HOLDER).read_text()), signal.SIGKILL)  # its producer dies mid-transaction
        (hold / RELEASE).touch()
        wait_for(lambda: job.running() or sink_caught_up(bootstrap_servers, sink, sent, 2), 180, "every winner")
        job.stop()
        log = job.log()
    assert len(re.findall(r"WARNING streaming.job.compaction_stages: the compaction stage's tasks failed", log)) >= 1
    moved = transactional_id(_job_id(job.state_dir), 1)
    assert re.search(rf"{moved} \(attempt 0\): emitting to [^\n]*{sink}-0", log), "partition 0 went to slot 1's task"
    assert "a transaction of this job's was open" not in log, "the fence ended it before its new writer read"
    assert_sink_contract(bootstrap_servers, sink, sent, 2)


def test_ids_of_more_slots_than_the_job_runs_now_are_fenced_when_it_shrinks(spark, bootstrap_servers, new_topic,
                                                                             tmp_path) -> None:
    src, sink = new_topic(partitions=4), unique_topic_name("sink")
    state_dir = str(tmp_path / "state")
    sent = produce(bootstrap_servers, src, [Sent(i % 4, b"k%d" % (i % 40), b"a%d" % i, _past() + i)
                                            for i in range(400)])
    assert run_once(bootstrap_servers, src, sink, state_dir, *CONFIG, extra=("--drain",)) == 0  # local[2]: 4 tasks
    slots = json.loads((tmp_path / "state" / "transactional-slots.json").read_text())["slots"]
    assert slots == 4, slots
    zombie = Producer({"bootstrap.servers": bootstrap_servers, "transaction.timeout.ms": 900_000,
                       "transactional.id": transactional_id(_job_id(state_dir), slots - 1)})
    zombie.init_transactions(30)  # slot 3's task of a run that died: its transaction left open on partition 2
    zombie.begin_transaction()
    zombie.produce(sink, key=b"zombie", value=b"never committed", partition=2, headers=[(OFFSET_HEADER, b"999999")])
    zombie.flush(30)
    sent += produce(bootstrap_servers, src, [Sent(i % 4, b"k%d" % (i % 40), b"b%d" % i, _past() + i)
                                             for i in range(100)])
    done = kcompact("run", "--bootstrap-servers", bootstrap_servers, "--source-topic", src, "--sink-topic", sink,
                    "--state-dir", state_dir, "--once", "--drain", "--spark-master", "local[1]", *COMPACTED_SINK,
                    *(a for c in CONFIG for a in ("--config", c)))
    assert done.returncode == 0, done.stderr[-4000:]
    assert "another writer's transaction" not in done.stderr and "was open" not in done.stderr, done.stderr[-4000:]
    assert json.loads((tmp_path / "state" / "transactional-slots.json").read_text())["slots"] == 4, "kept"
    assert b"zombie" not in {r.key for r in read_committed(bootstrap_servers, sink, 4)}
    assert_sink_contract(bootstrap_servers, sink, sent, 4)


def test_a_frozen_task_whose_stage_ran_again_elsewhere_never_commits(bootstrap_servers, new_topic, tmp_path) -> None:
    """A lost executor's task still alive: its executor (the JVM and its Python processes) frozen with SIGSTOP
    after its task produced records into its transaction and before the commit. Spark declares it lost and
    runs the task again on the other executor; the new attempt, with the same slot's id, fences the frozen
    one and emits. Thawed, the frozen task's commit fails (or it dies with its executor): none of its writes
    is ever committed, and the sink contract and verify hold."""
    from tests.spark_cluster import process_tree, standalone_cluster

    src, sink = new_topic(partitions=2), unique_topic_name("sink")
    sent = produce(bootstrap_servers, src, [Sent(i % 2, b"k%d" % (i % 40), b"a%d" % i, _past() + i)
                                            for i in range(400)])
    hold = tmp_path / "hold"
    hold.mkdir()
    settings = {"spark.network.timeout": "10s", "spark.network.timeoutInterval": "1s",
                "spark.executor.heartbeatInterval": "1s", "spark.cores.max": "2", "spark.executor.cores": "1",
                "spark.executor.memory": "512m",  # the executors' tasks hold at the flush: they get no driver's env
                f"spark.executorEnv.{HOLD_ENV}": f"{Moment.FLUSH.value}:{hold}"}
    with standalone_cluster(tmp_path / "cluster", workers=2) as cluster:
        extra = ("--spark-master", cluster.master_url, *(a for k, v in settings.items() for a in ("--spark-conf", f"{k}={v}")))
        with RunningJob(bootstrap_servers, src, sink, tmp_path, *CONFIG, extra=extra) as job:
            wait_for(lambda: job.running() or ((hold / REACHED).exists() and (hold / REACHED).read_text()), 240,
                     "a task held at its flush")
            frozen = process_tree(int((hold / HOLDER).read_text()))
            for pid in frozen:
                os.kill(pid, signal.SIGSTOP)
            try:
                wait_for(lambda: job.running() or sink_caught_up(bootstrap_servers, sink, sent, 2), 180,
                         "every winner, the frozen task's work run again elsewhere")
            finally:
                for pid in frozen:
                    with contextlib.suppress(ProcessLookupError):  # killed as its executor was removed
                        os.kill(pid, signal.SIGCONT)
                (hold / RELEASE).touch()
            sent += produce(bootstrap_servers, src, [Sent(i % 2, b"k%d" % (i % 40), b"b%d" % i, _past() + i)
                                                     for i in range(100)])
            wait_for(lambda: job.running() or sink_caught_up(bootstrap_servers, sink, sent, 2), 180, "every winner")
            job.stop()
        workers = "".join(cluster.executor_logs())
    assert re.search(r"kcompact-\w+-\d \(attempt 1\): emitting to", workers), "the task ran again"
    assert_sink_contract(bootstrap_servers, sink, sent, 2)
    verified = kcompact("verify", "--state-dir", job.state_dir)
    assert verified.returncode == 0, verified.stdout[-3000:] + verified.stderr[-3000:]
