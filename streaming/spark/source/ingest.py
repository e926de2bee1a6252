"""The compactor's own source: the Kafka source's offsets and reads, with each read appended to the
partition logs where it happens.

Spark's Python sources hand their Arrow batches to the JVM, which turns them into rows and, for the
appender's mapInArrow, back into Arrow for another Python worker: about as much CPU as reading the records
from Kafka (bench/README.md). Here the task that reads a partition appends it (job.append.append_partitions)
and returns only its row of counts. Spark still plans every micro-batch's offsets and keeps them in its
checkpoint, and reads a batch again after a crash; appends are idempotent by offset, so the replay is
skipped record by record, as before.

The append's settings (the append time, each topic's log config) change from batch to batch, so they come
from the driver as a local property of the job that reads the batch (Spark hands those to every task of
the job), not as source options, which are fixed when the query starts.
"""

from __future__ import annotations

import dataclasses
from typing import Iterator

import pyarrow as pa
from pyspark import TaskContext

from streaming.job.append_counts import STATS_DDL
from streaming.job.task import prepare_task
from streaming.spark.source.kafka_source import KafkaDataSource, KafkaInputPartition, KafkaStreamReader, read_ranges
from streaming.spark.source.options import KafkaSourceOptions

INGEST_SOURCE_NAME = "kcompact-ingest"
APPEND_TASK_PROPERTY = "kcompact.append.task"  # the local property holding the AppendTask, as JSON


class MissingAppendTask(RuntimeError):
    """The ingest source was read by something other than the compactor's micro-batch handler."""


class KafkaIngestReader(KafkaStreamReader):
    def read(self, partition: KafkaInputPartition) -> Iterator[pa.RecordBatch]:
        # In the task only: Spark's planning process, started for every query, loads this module too, and the
        # appender brings the whole log (numba, fastavro) with it, most of that process's own import time.
        from streaming.job.append import APPEND_ROWS, AppendTask, append_partitions  # noqa: PLC0415

        text = TaskContext.get().getLocalProperty(APPEND_TASK_PROPERTY)
        if text is None:
            raise MissingAppendTask(f"the {INGEST_SOURCE_NAME} source appends what it reads: read it with "
                                    f"the local property {APPEND_TASK_PROPERTY} set (SparkMicroBatch.append)")
        # read in batches of what an append takes: they reach no Spark, and the appender need not join them
        options = dataclasses.replace(self.options, records_per_batch=APPEND_ROWS)
        prepare_task([options.client_config])
        yield from append_partitions(read_ranges(options, partition.ranges), AppendTask.from_json(text))


class KafkaIngestSource(KafkaDataSource):
    """Registered beside kcompact-kafka; its rows are the append's counts (job.append_counts.STATS_SCHEMA)."""

    @classmethod
    def name(cls) -> str:
        return INGEST_SOURCE_NAME

    def schema(self) -> str:
        return STATS_DDL

    def streamReader(self, schema) -> KafkaIngestReader:
        return KafkaIngestReader(KafkaSourceOptions.parse(self.options))
