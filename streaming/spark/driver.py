"""The job's engine on Spark (streaming.job.engine): the one place that builds the streaming query, runs
stages of tasks and reads Spark's progress, so job/ hands over typed values and plain functions only.

The session starts when the job first needs it: a `--once` run that finds nothing to read and nothing to
clean never starts it (its checkpoint is read as files, streaming.spark.checkpoint)."""

from __future__ import annotations

import signal
import threading
from dataclasses import dataclass
from typing import Callable, Sequence, TypeVar

from pyspark import TaskContext
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import StreamingQuery

from streaming.job.append import AppendTask
from streaming.job.append_counts import PartitionAppended
from streaming.job.engine import MicroBatch, QueryPlan
from streaming.log.storage import Storage
from streaming.partition_id import PartitionId
from streaming.spark import jvm_log
from streaming.spark.checkpoint import committed_offsets
from streaming.spark.source.ingest import APPEND_TASK_PROPERTY, INGEST_SOURCE_NAME
from streaming.spark.source.options import spark_options

T = TypeVar("T")
R = TypeVar("R")


@dataclass(frozen=True)
class SparkMicroBatch:
    df: DataFrame

    def append(self, task: AppendTask) -> list[PartitionAppended]:
        context = self.df.sparkSession.sparkContext
        context.setLocalProperty(APPEND_TASK_PROPERTY, task.to_json())  # this thread's jobs only
        try:
            return [PartitionAppended.from_row(row.asDict()) for row in self.df.collect()]
        finally:
            context.setLocalProperty(APPEND_TASK_PROPERTY, None)


@dataclass(frozen=True)
class SparkQuery:
    query: StreamingQuery

    @property
    def is_active(self) -> bool:
        return self.query.isActive

    def stop(self) -> None:
        self.query.stop()

    def exception(self) -> BaseException | None:
        return self.query.exception()

    def await_termination(self, timeout_s: float | None = None) -> None:
        self.query.awaitTermination(timeout_s)


class SparkEngine:
    def __init__(self, spark: SparkSession | Callable[[], SparkSession]) -> None:
        self._spark, self._start = (spark, None) if isinstance(spark, SparkSession) else (None, spark)

    def start(self) -> None:
        if self._spark is None:
            handler = signal.getsignal(signal.SIGINT)
            self._spark = self._start()
            if threading.current_thread() is threading.main_thread():
                signal.signal(signal.SIGINT, handler)  # SparkContext puts its own in; the job's Ctrl-C stays

    @property
    def spark(self) -> SparkSession:
        self.start()
        return self._spark

    def committed_offsets(self, storage: Storage, checkpoint: str) -> dict[PartitionId, int] | None:
        return committed_offsets(storage, checkpoint)

    def start_query(self, plan: QueryPlan, on_batch: Callable[[MicroBatch, int], None]) -> SparkQuery:
        reader = self.spark.readStream.format(INGEST_SOURCE_NAME)
        for key, value in spark_options(plan.source).items():
            reader = reader.option(key, value)
        writer = (reader.load().writeStream
                  .foreachBatch(lambda df, batch_id: on_batch(SparkMicroBatch(df), batch_id))
                  .option("checkpointLocation", plan.checkpoint_location))
        writer = writer.trigger(availableNow=True) if plan.once else \
            writer.trigger(processingTime=f"{plan.trigger_interval_s} seconds")
        return SparkQuery(writer.start())

    def run_tasks(self, task: Callable[[T, int], R], items: Sequence[T]) -> list[R]:
        def attempted(item: T) -> R:
            return task(item, TaskContext.get().attemptNumber())
        return self.spark.sparkContext.parallelize(list(items), len(items)).map(attempted).collect()

    def slots(self) -> int:
        return self.spark.sparkContext.defaultParallelism

    def tasks_done(self) -> tuple[int, int] | None:
        if self._spark is None:
            return None
        tracker = self._spark.sparkContext.statusTracker()
        stages = [s for s in map(tracker.getStageInfo, tracker.getActiveStageIds()) if s is not None]
        if not stages:
            return None
        return sum(s.numCompletedTasks for s in stages), sum(s.numTasks for s in stages)

    def stop_begun(self) -> None:
        jvm_log.STOP_BEGUN.set()
