"""The job on a Spark standalone cluster (1 master, 2 workers on 127.0.0.1, executors in their own JVMs),
submitted with `kcompact submit` as the README shows, from a shell with no virtualenv activated, with its
state on an S3-compatible server: the sink equals the model, the logs are on the store, compaction tasks
ran on both workers (their own log lines are in both workers' executor logs), and the terminal shows what a
local run shows: kcompact's lines on stderr, Spark's only at WARN and above, the plan on stdout. A worker
killed mid-stage has its stage run again on the other one."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time

import pytest

from streaming.kafka.admin import unique_topic_name
from streaming.log.manifest import MANIFESTS
from streaming.runtime.moments import HOLD_ENV, HOLDER, REACHED, RELEASE, Moment
from tests.e2e.helpers import (NO_SINK_COMPACTION, assert_sink_contract, read_topic, sent_view, sink_caught_up,
                               sink_view, wait_for, winners)
from tests.e2e.running_job import RunningJob
from tests.kafka_helpers import Sent, produce
from tests.cli.test_first_contact import KCOMPACT, TEXT_LINE, kcompact
from tests.spark_cluster import WORKER, process_tree, standalone_cluster

pytestmark = pytest.mark.integration

HOUR = 3_600_000


def test_a_job_on_a_standalone_cluster_with_state_on_s3_emits_the_model(bootstrap_servers, new_topic, s3_server,
                                                                         tmp_path) -> None:
    src, sink = new_topic(partitions=4), unique_topic_name("sink")
    past = int(time.time() * 1000) - 2 * HOUR
    sent = produce(bootstrap_servers, src, [Sent(i % 4, b"key-%d" % (i % 50), None if i % 17 == 0 else b"v%d" % i,
                                                 past + i) for i in range(2000)])
    bucket = s3_server.new_bucket()
    state = s3_server.uri(bucket, "jobs/cluster")
    with standalone_cluster(tmp_path / "cluster", workers=2) as cluster:
        # an uncompacted sink (NO_SINK_COMPACTION): the sink's every record against the winners, in order
        command = [*KCOMPACT, "submit", "--master", cluster.master_url,
                   "--conf", "spark.executor.memory=512m", "--conf", "spark.executor.cores=1",
                   "--conf", "spark.cores.max=2",
                   "run", "--bootstrap-servers", bootstrap_servers, "--source-topic", src,
                   "--sink-topic", sink, "--state-dir", state, "--checkpoint-location", str(tmp_path / "checkpoint"),
                   "--once", "--config", "max.compaction.lag.ms=60000", *NO_SINK_COMPACTION,
                   # the workers' passes, a line each at DEBUG: where each partition's compaction ran
                   "--spark-conf", "spark.executorEnv.KCOMPACT_LOG_LEVEL=DEBUG"]
        bare = {k: v for k, v in os.environ.items() if k not in ("SPARK_HOME", "VIRTUAL_ENV", "SPARK_LOCAL_IP")}
        bare["PATH"] = "/usr/bin:/bin"  # no activated virtualenv: kcompact finds Spark and its Python itself
        out = subprocess.run(command, capture_output=True, text=True, timeout=900, env=bare)
        assert out.returncode == 0, out.stderr[-5000:]
        executors = cluster.executor_dirs()
        logs = cluster.executor_logs()
    err = [line for line in out.stderr.splitlines() if line.strip()]
    assert all(TEXT_LINE.match(line) for line in err), err
    spark_lines = [line for line in err if " spark." in line]
    print(f"{len(err)} lines on stderr, {len(spark_lines)} of them Spark's: {spark_lines}")
    assert not [line for line in spark_lines if " INFO " in line or " DEBUG " in line], spark_lines
    assert len(spark_lines) <= 3, spark_lines
    assert err[-1].endswith(" done: 2000 records ingested, 4 passes, " + err[-1].split(" passes, ")[1]), err[-1]
    assert out.stdout.startswith(f"mirroring 1 topic(s) (4 partitions) from {bootstrap_servers}") and not TEXT_LINE.search(out.stdout)
    assert all(executors), f"every worker started an executor JVM: {executors}"
    ran = [set(re.findall(rf" DEBUG streaming.cleaner.cleaner: cleaned {re.escape(src)}-(\d) ", text)) for text in logs]
    assert all(ran), f"compaction tasks ran on every worker: {ran}"
    assert set().union(*ran) == {"0", "1", "2", "3"}, f"every partition's compaction ran on a worker: {ran}"
    got = read_topic(bootstrap_servers, sink, 4)
    for p in range(4):
        assert sink_view(got[p]) == sent_view(winners([s for s in sent if s.partition == p])), f"partition {p}"
    listed = s3_server.client().list_objects_v2(Bucket=bucket, Prefix=f"jobs/cluster/logs/{src}-0/{MANIFESTS}/")
    assert listed.get("KeyCount", 0) > 0, "the partition logs live on the object store"


@pytest.mark.slow
def test_a_worker_killed_mid_stage_with_state_on_s3_has_the_stage_run_again_and_verify_is_clean(
        bootstrap_servers, new_topic, s3_server, tmp_path) -> None:
    """A worker (its JVM, its executor and their Python processes) SIGKILLed while one of its append tasks
    holds its records: the stage runs again on the other worker, against the same logs on the store."""
    src, sink = new_topic(partitions=2), unique_topic_name("sink")
    past = int(time.time() * 1000) - 2 * HOUR
    sent = produce(bootstrap_servers, src, [Sent(i % 2, b"k%d" % (i % 40), b"a%d" % i, past + i) for i in range(400)])
    hold = tmp_path / "hold"
    hold.mkdir()
    state = s3_server.uri(s3_server.new_bucket(), "jobs/killed")
    settings = {"spark.cores.max": "2", "spark.executor.cores": "1", "spark.executor.memory": "512m",
                f"spark.executorEnv.{HOLD_ENV}": f"{Moment.APPEND.value}:{hold}"}  # executors get no driver's env
    with standalone_cluster(tmp_path / "cluster", workers=2) as cluster:
        extra = ("--spark-master", cluster.master_url, "--checkpoint-location", str(tmp_path / "checkpoint"),
                 *(a for k, v in settings.items() for a in ("--spark-conf", f"{k}={v}")))
        with RunningJob(bootstrap_servers, src, sink, tmp_path, "max.compaction.lag.ms=1000",
                        "min.cleanable.dirty.ratio=0.1", state_dir=state, extra=extra) as job:
            wait_for(lambda: job.running() or (hold / REACHED).exists(), 240, "an append task held")
            killed = process_tree(int((hold / HOLDER).read_text()), WORKER)
            for pid in killed:
                os.kill(pid, signal.SIGKILL)
            (hold / RELEASE).touch()
            wait_for(lambda: job.running() or sink_caught_up(bootstrap_servers, sink, sent, 2), 180,
                     "every winner, the killed worker's stage run again")
            job.stop()
            log = job.log()
    assert re.search(r"Lost executor|executor \d+ .*(lost|exited)", log, re.IGNORECASE), "the worker's executor was lost"
    assert_sink_contract(bootstrap_servers, sink, sent, 2)
    verified = kcompact("verify", "--state-dir", state)
    assert verified.returncode == 0, verified.stdout[-3000:] + verified.stderr[-3000:]
