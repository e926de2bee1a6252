"""The job on a Spark standalone cluster (1 master, 2 workers on 127.0.0.1, executors in their own JVMs),
submitted with `kcompact submit` as the README shows, from a shell with no virtualenv activated, with its
state on an S3-compatible server: the sink equals the model, the logs are on the store, compaction tasks
ran on both workers (their own log lines are in both workers' executor logs), and the terminal shows what a
local run shows: kcompact's lines on stderr, Spark's only at WARN and above, the plan on stdout."""

from __future__ import annotations

import os
import re
import subprocess
import time

import pytest

from streaming.kafka.admin import unique_topic_name
from streaming.log.manifest import MANIFESTS
from tests.e2e.helpers import NO_SINK_COMPACTION, read_topic, sent_view, sink_view, winners
from tests.kafka_helpers import Sent, produce
from tests.cli.test_first_contact import KCOMPACT, TEXT_LINE
from tests.spark_cluster import standalone_cluster

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
        command = [*KCOMPACT, "submit", "--master", cluster.master_url,
                   "--conf", "spark.executor.memory=512m", "--conf", "spark.executor.cores=1",
                   "--conf", "spark.cores.max=2",
                   "run", "--bootstrap-servers", bootstrap_servers, "--source-topic", src,
                   "--sink-topic", sink, "--state-dir", state, "--checkpoint-location", str(tmp_path / "checkpoint"),
                   "--once", "--config", "max.compaction.lag.ms=60000", *NO_SINK_COMPACTION]
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
    ran = [set(re.findall(rf" INFO streaming.cleaner.cleaner: cleaned {re.escape(src)}-(\d) ", text)) for text in logs]
    assert all(ran), f"compaction tasks ran on every worker: {ran}"
    assert set().union(*ran) == {"0", "1", "2", "3"}, f"every partition's compaction ran on a worker: {ran}"
    got = read_topic(bootstrap_servers, sink, 4)
    for p in range(4):
        assert sink_view(got[p]) == sent_view(winners([s for s in sent if s.partition == p])), f"partition {p}"
    listed = s3_server.client().list_objects_v2(Bucket=bucket, Prefix=f"jobs/cluster/logs/{src}-0/{MANIFESTS}/")
    assert listed.get("KeyCount", 0) > 0, "the partition logs live on the object store"
