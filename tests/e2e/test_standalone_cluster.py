"""The job on a Spark standalone cluster (1 master, 2 workers on 127.0.0.1, executors in their own JVMs),
submitted with spark-submit as the README shows, with its state on an S3-compatible server: the sink
equals the model, the logs are on the store, and compaction tasks ran on both workers (their own log lines
are in both workers' executor logs)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time

import pytest

from streaming.cli.submit import __file__ as SUBMIT_FILE
from streaming.kafka.admin import unique_topic_name
from streaming.log.manifest import MANIFESTS
from tests.e2e.helpers import NO_SINK_COMPACTION, read_topic, sent_view, sink_view, winners
from tests.kafka_helpers import Sent, produce
from tests.spark_cluster import spark_script, standalone_cluster

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
        command = [spark_script("spark-submit"), "--master", cluster.master_url,
                   "--conf", "spark.executor.memory=512m", "--conf", "spark.executor.cores=1",
                   "--conf", "spark.cores.max=2", "--conf", f"spark.pyspark.python={sys.executable}",
                   "--conf", "spark.driver.host=127.0.0.1",
                   SUBMIT_FILE, "--log-level", "DEBUG", "run", "--bootstrap-servers", bootstrap_servers, "--source-topic", src,
                   "--sink-topic", sink, "--state-dir", state, "--checkpoint-location", str(tmp_path / "checkpoint"),
                   "--once", "--config", "max.compaction.lag.ms=60000", *NO_SINK_COMPACTION]
        with open(tmp_path / "driver.log", "w") as out:
            rc = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, timeout=900,
                                env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"}).returncode
        assert rc == 0, (tmp_path / "driver.log").read_text()[-5000:]
        executors = cluster.executor_dirs()
        logs = cluster.executor_logs()
    assert all(executors), f"every worker started an executor JVM: {executors}"
    ran = [set(re.findall(rf"phase: clean {re.escape(src)}-(\d)", text)) for text in logs]
    assert all(ran), f"compaction tasks ran on every worker: {ran}"
    assert set().union(*ran) == {"0", "1", "2", "3"}, f"every partition's compaction ran on a worker: {ran}"
    got = read_topic(bootstrap_servers, sink, 4)
    for p in range(4):
        assert sink_view(got[p]) == sent_view(winners([s for s in sent if s.partition == p])), f"partition {p}"
    listed = s3_server.client().list_objects_v2(Bucket=bucket, Prefix=f"jobs/cluster/logs/{src}-0/{MANIFESTS}/")
    assert listed.get("KeyCount", 0) > 0, "the partition logs live on the object store"
