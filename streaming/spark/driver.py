"""The job's engine on Spark (streaming.job.engine): the one place that builds the streaming query, runs
stages of tasks and reads Spark's progress, so job/ hands over typed values and plain functions only.

The session starts when the job first needs it: a `--once` run that finds nothing to read and nothing to
clean never starts it (its checkpoint is read as files, streaming.spark.checkpoint)."""

from __future__ import annotations

import logging
import signal
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence, TypeVar

from py4j.protocol import Py4JJavaError
from pyspark import TaskContext
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import StreamingQuery

from streaming.job.append import AppendTask
from streaming.job.append_counts import PartitionAppended
from streaming.job.engine import EngineProcessLost, MicroBatch, QueryPlan
from streaming.log.storage import Storage
from streaming.partition_id import PartitionId
from streaming.spark import jvm_log
from streaming.spark.checkpoint import committed_offsets
from streaming.spark.class_archive import RECORD_CONF, ClassArchive
from streaming.spark.source.ingest import APPEND_TASK_PROPERTY, INGEST_SOURCE_NAME
from streaming.spark.source.options import spark_options

log = logging.getLogger(__name__)

WORKER_FACTORY = "org.apache.spark.api.python.PythonWorkerFactory"  # starts the processes below
CAUSES_LOOKED_AT = 16  # a chain of causes is short; a cycle in one is not followed for ever

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
        except Py4JJavaError as exc:
            lost = TASK_WORKER.lost(exc.java_exception)
            if lost is None:
                raise
            raise lost from exc
        finally:
            context.setLocalProperty(APPEND_TASK_PROPERTY, None)


@dataclass
class BatchFailure:
    """What a micro-batch failed on, when a worker of its tasks ended under it: the query learns it only as the
    text py4j hands back, so the driver keeps it."""

    lost: EngineProcessLost | None = None


@dataclass(frozen=True)
class SparkQuery:
    query: StreamingQuery
    batch_failure: BatchFailure

    @property
    def is_active(self) -> bool:
        return self.query.isActive

    def stop(self) -> None:
        self.query.stop()

    def exception(self) -> BaseException | None:
        failure = self.query.exception()
        if failure is None:
            return None
        if self.batch_failure.lost is not None:
            return self.batch_failure.lost
        # pyspark keeps only the text of the JVM's exception and its first cause: the chain is read from the JVM
        lost = PLANNER.lost(self.query._jsq.exception().get())  # noqa: SLF001
        if lost is None:
            return failure
        lost.__cause__ = failure
        return lost

    def await_termination(self, timeout_s: float | None = None) -> None:
        self.query.awaitTermination(timeout_s)


class SparkEngine:
    def __init__(self, spark: SparkSession | Callable[[], SparkSession]) -> None:
        self._spark, self._start = (spark, None) if isinstance(spark, SparkSession) else (None, spark)
        self._archive: ClassArchive | None = None

    def start(self) -> None:
        if self._spark is None:
            handler = signal.getsignal(signal.SIGINT)
            began = time.monotonic()
            self._spark = self._start()
            log.info("Spark started in %.1fs", time.monotonic() - began)
            if threading.current_thread() is threading.main_thread():
                signal.signal(signal.SIGINT, handler)  # SparkContext puts its own in; the job's Ctrl-C stays
            threading.Thread(target=self._start_workers, name="python-workers", daemon=True).start()

    def _start_workers(self) -> None:
        """Spark starts its Python worker daemon (streaming.spark.daemon, which preloads the compactor) at the
        first task, seconds of CPU; a job of empty tasks now starts it while the query plans its first
        micro-batch, which then finds its workers ready."""
        slots = self.slots()
        try:
            self._spark.sparkContext.parallelize(range(slots), slots).foreach(_nothing)
        except Exception as exc:  # noqa: BLE001 (a session stopped meanwhile: the first batch starts them)
            log.debug("Python workers not started ahead: %s", exc)

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

        began: float | None = time.monotonic()
        failure = BatchFailure()

        def batch(df: DataFrame, batch_id: int) -> None:
            nonlocal began
            if began is not None:  # what a restart waits for: the query's start, from its checkpoint
                log.info("micro-batch %d planned %.1fs after the query's start", batch_id, time.monotonic() - began)
                began = None
            try:
                on_batch(SparkMicroBatch(df), batch_id)
            except EngineProcessLost as exc:
                failure.lost = exc
                raise
            if not plan.once:  # a job that lives on after its dump (a --once run could end in the middle of it)
                self._archive_classes()

        writer = (reader.load().writeStream
                  .foreachBatch(batch)
                  .option("checkpointLocation", plan.checkpoint_location))
        writer = writer.trigger(availableNow=True) if plan.once else \
            writer.trigger(processingTime=f"{plan.trigger_interval_s} seconds")
        return SparkQuery(writer.start(), failure)

    def _archive_classes(self) -> None:
        """After a micro-batch, the JVM holds the classes a start loads: dump them for the next start when this
        launch records them (streaming.spark.class_archive), once."""
        if self._archive is None:
            directory = self.spark.conf.get(RECORD_CONF, None)
            self._archive = ClassArchive(Path(directory) if directory else None)
            gateway = self.spark.sparkContext._gateway  # noqa: SLF001 (the JVM this process launched)
            self._archive.dump_from(gateway.proc.pid if getattr(gateway, "proc", None) else None)

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


@dataclass(frozen=True)
class PythonLink:
    """The JVM's side of one kind of Python process: ``runner``, the classes whose reads and writes speak with
    it, and ``who`` it is, as a line names it."""

    runner: str
    who: str

    def lost(self, failure) -> EngineProcessLost | None:
        """EngineProcessLost, when the JVM's exception ``failure`` happened because such a process ended: an I/O
        error (no answer, a broken pipe) in the runner's reads and writes once the process had started. One
        that could not start (its worker factory, the runner's init) is a fault to report, not to ride out."""
        cause = failure
        for _ in range(CAUSES_LOOKED_AT):
            if cause is None:
                return None
            frames = [(f.getClassName(), f.getMethodName()) for f in cause.getStackTrace()] \
                if _is_io_error(cause) else []  # each frame is two calls to the JVM: only an I/O error's are read
            if (any(c.startswith(self.runner) and m != "init" for c, m in frames)
                    and not any(c.startswith(WORKER_FACTORY) for c, _ in frames)):
                return EngineProcessLost(f"a Python process of the engine ended under the query ({self.who}, "
                                         f"killed or crashed; {cause.getClass().getName()}: "
                                         f"{cause.getMessage() or 'no message'})")
            cause = cause.getCause()
        return None


PLANNER = PythonLink("org.apache.spark.sql.execution.python.streaming.PythonStreamingSourceRunner",
                     "the planner of the source's offsets")
TASK_WORKER = PythonLink("org.apache.spark.api.python.BasePythonRunner$", "a task's worker")


def _is_io_error(throwable) -> bool:
    """A java.io.IOException, of whatever subclass (an EOFException, a broken pipe)."""
    kind = throwable.getClass()
    while kind is not None and kind.getName() != "java.io.IOException":
        kind = kind.getSuperclass()
    return kind is not None


def _nothing(_: int) -> None:
    """The task that starts a Python worker and does nothing else."""
