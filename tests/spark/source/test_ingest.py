"""The job's ingest source appends where it reads, and only for the job; the Kafka source beside it still
gives Spark's Kafka columns to any query."""

from __future__ import annotations

import subprocess
import sys

import pytest

from streaming.erasure.events import AuditKeys
from streaming.job.append import AppendTask
from streaming.log import LogConfig
from streaming.spark.source.ingest import APPEND_TASK_PROPERTY, INGEST_SOURCE_NAME
from streaming.spark.source.kafka_source import SOURCE_NAME
from tests.job.test_append import mixed_records
from tests.kafka_helpers import produce


def test_the_append_task_crosses_to_the_executors_unchanged() -> None:
    task = AppendTask("s3://bucket/state", {"t": LogConfig(segment_bytes=1000, segment_ms=60_000, fsync=False)},
                      1_700_000_000_123, LogConfig(segment_jitter_ms=5), AuditKeys.KEY)
    assert AppendTask.from_json(task.to_json()) == task


def test_the_planning_process_loads_the_source_without_the_log() -> None:
    """Spark starts a Python process to plan each query's offsets, and it loads the source's module: the log
    (and numba with it) is the appender's, needed by the tasks only."""
    code = ("import sys, streaming.spark.source.ingest; print(sorted(m for m in sys.modules "
            "if m in ('numba', 'streaming.job.append') or m.startswith('streaming.log.')))")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert loaded == "[]", loaded


def _available_now(spark, source: str, bootstrap: str, topic: str, checkpoint: str, on_batch) -> None:
    """Run a query over ``source`` to the end offsets; a failed query raises its failure."""
    query = (spark.readStream.format(source).option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
             .load().writeStream.foreachBatch(on_batch).option("checkpointLocation", checkpoint)
             .trigger(availableNow=True).start())
    query.awaitTermination(300)


@pytest.mark.integration
def test_a_read_without_the_append_task_is_refused_naming_it(spark, bootstrap_servers, new_topic, tmp_path) -> None:
    topic = new_topic()
    produce(bootstrap_servers, topic, mixed_records(5, 1))
    with pytest.raises(Exception, match=APPEND_TASK_PROPERTY):  # Spark hands it on inside its own exceptions
        _available_now(spark, INGEST_SOURCE_NAME, bootstrap_servers, topic, str(tmp_path / "checkpoint"),
                       lambda df, _: df.collect())


@pytest.mark.integration
def test_the_kafka_source_gives_every_record_in_sparks_kafka_columns(spark, bootstrap_servers, new_topic,
                                                                      tmp_path) -> None:
    topic = new_topic(partitions=2)
    sent = produce(bootstrap_servers, topic, mixed_records(40, 2))
    rows: list = []
    _available_now(spark, SOURCE_NAME, bootstrap_servers, topic, str(tmp_path / "checkpoint"),
                   lambda df, _: rows.extend(df.collect()))
    got = sorted((r.partition, r.offset, r.key, r.value, int(r.timestamp.timestamp() * 1000), r.timestampType,
                  [(h.key, h.value) for h in r.headers], r.topic) for r in rows)
    want = sorted((s.partition, s.offset, s.key, s.value, s.timestamp, 0, s.headers, topic) for s in sent)
    assert got == want
