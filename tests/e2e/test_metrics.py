"""The Prometheus endpoint of a running job, and the same figures from `kcompact status` once it is down."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from streaming.brokers.local import free_port
from streaming.kafka.admin import unique_topic_name
from tests.e2e.helpers import COMPACTED_SINK
from tests.kafka_helpers import Sent, produce

pytestmark = pytest.mark.integration


def scrape(port: int) -> dict[str, list]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        text = response.read().decode()
    return {f.name: f.samples for f in text_string_to_metric_families(text)}


def test_metrics_endpoint_serves_kafka_cleaner_gauges_and_lags_and_status_keeps_them(bootstrap_servers,
                                                                                    new_topic, tmp_path) -> None:
    src, sink = new_topic(partitions=2), unique_topic_name("sink")
    past = int(time.time() * 1000) - 7_200_000
    produce(bootstrap_servers, src, [Sent(i % 2, b"k%d" % (i % 10), None if i == 98 else b"v%d" % i,
                                          -1 if i == 99 else past + i)
                                     for i in range(100)])  # one NO_TIMESTAMP record: a warning from a worker;
    # one tombstone (k8's last record), two hours old: erased and in the sink it is late, but not overdue
    port = free_port()
    state = str(tmp_path / "state")
    proc = subprocess.Popen([sys.executable, "-m", "streaming", "--log-format", "json", "run",
                             "--bootstrap-servers", bootstrap_servers, "--source-topic", src, "--sink-topic", sink,
                             "--state-dir", state, "--trigger-interval", "1", "--metrics-port", str(port),
                             "--metrics-host", "127.0.0.1", "--config", "max.compaction.lag.ms=2000",
                             *COMPACTED_SINK], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        metrics: dict = {}
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                metrics = scrape(port)
            except OSError:
                metrics = {}
            emitted = metrics.get("kcompact_records_emitted", [])
            if emitted and emitted[0].value >= 10:  # 5 keys in each partition
                break
            time.sleep(1)
        assert metrics.get("kcompact_records_emitted") and metrics["kcompact_records_emitted"][0].value == 10
        assert metrics["kcompact_records_ingested"][0].value == 100
        for kafka_name in ("max_dirty_percent", "max_compaction_delay_secs", "uncleanable_partitions_count",
                           "uncleanable_bytes", "max_clean_time_secs", "cleaner_recopy_percent",
                           "max_buffer_utilization_percent", "time_since_last_run_ms"):
            assert f"kcompact_cleaner_{kafka_name}" in metrics, kafka_name
        lags = {(s.labels["partition"], s.name): s.value for name in ("kcompact_partition_ingest_lag",
                                                                      "kcompact_partition_emit_lag",
                                                                      "kcompact_partition_source_end_offset")
                for s in metrics[name]}
        assert lags[("0", "kcompact_partition_source_end_offset")] == 50
        assert lags[("0", "kcompact_partition_ingest_lag")] == 0 and lags[("1", "kcompact_partition_ingest_lag")] == 0
        erased = {(s.labels["until"], s.name): s.value for s in metrics["kcompact_erase_latency_seconds"]}
        for until in ("log", "sink"):
            assert erased[(until, "kcompact_erase_latency_seconds_count")] == 1
            assert erased[(until, "kcompact_erase_latency_seconds_sum")] > 7000  # seconds since the tombstone's time
        assert [s.value for s in metrics["kcompact_partition_erasures_overdue"]] == [0, 0]
    finally:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(60)
    stderr = proc.stderr.read()
    assert code == 0, stderr[-3000:]
    ours = [json.loads(line) for line in stderr.splitlines() if line.startswith('{"time"')]
    assert any(d["logger"] == "streaming.job.runner" and d["message"].startswith("stopped:") for d in ours), \
        "the driver logs JSON lines"
    assert any(d["logger"] == "streaming.job.append" and d["level"] == "WARNING" and "timestamp" in d["message"]
               for d in ours), "so do Spark's Python workers"

    status = json.loads(subprocess.run([sys.executable, "-m", "streaming", "status", "--state-dir", state, "--json"],
                                       capture_output=True, text=True, timeout=120, check=True).stdout)
    assert status["job"]["records-emitted"] == 10 and status["job"]["records-ingested"] == 100
    assert {p["partition"]: (p["source_end_offset"], p["ingest_lag"], p["emit_lag"]) for p in status["partitions"]} \
        == {0: (50, 0, 0), 1: (50, 0, 0)}
