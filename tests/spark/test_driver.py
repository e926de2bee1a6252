"""Which failures of the query are a Python process of the engine that ended under it (ridden out: the query
starts again from its checkpoint) and which are not (reported): read from the JVM's own exceptions."""

from __future__ import annotations

import pytest

from streaming.job.engine import EngineProcessLost
from streaming.spark.driver import PLANNER, TASK_WORKER

TASK_READER = ("org.apache.spark.api.python.BasePythonRunner$ReaderIterator", "hasNext")
PLANNER_READ = ("org.apache.spark.sql.execution.python.streaming.PythonStreamingSourceRunner", "latestOffset")
PLANNER_INIT = ("org.apache.spark.sql.execution.python.streaming.PythonStreamingSourceRunner", "init")
WORKER_START = ("org.apache.spark.api.python.PythonWorkerFactory", "createSimpleWorker")
TASK_START = ("org.apache.spark.api.python.BasePythonRunner", "compute")


def _thrown(spark, throwable, frames: list[tuple[str, str]]):
    """``throwable``, a real JVM throwable, as thrown through ``frames`` (innermost first)."""
    jvm, gateway = spark.sparkContext._jvm, spark.sparkContext._gateway
    trace = gateway.new_array(jvm.java.lang.StackTraceElement, len(frames))
    for i, (cls, method) in enumerate(frames):
        trace[i] = jvm.java.lang.StackTraceElement(cls, method, "Runner.scala", 1)
    throwable.setStackTrace(trace)
    return throwable


def _aborted(spark, cause):
    """How a job whose task's worker failed reaches the driver: the task's failure inside the job's."""
    jvm = spark.sparkContext._jvm
    task = _thrown(spark, jvm.org.apache.spark.SparkException("Python worker exited unexpectedly", cause),
                   [TASK_READER])
    return _thrown(spark, jvm.org.apache.spark.SparkException("Job aborted", task), [("o", "m")])


@pytest.mark.parametrize("link, frames, lost", [
    (TASK_WORKER, [("java.io.DataInputStream", "readInt"), TASK_READER], True),
    (TASK_WORKER, [("java.io.DataInputStream", "readInt"), WORKER_START, TASK_START], False),
    (PLANNER, [("java.io.DataInputStream", "readInt"), PLANNER_READ], True),
    (PLANNER, [("java.io.DataInputStream", "readInt"), PLANNER_INIT], False),
    (PLANNER, [("java.io.DataInputStream", "readInt"), TASK_READER], False),
], ids=["a task's worker ended", "a task's worker that never started", "the planner ended",
        "a planner that never started", "another process than the one asked about"])
def test_an_end_of_stream_from_a_process_that_had_started_is_a_process_lost(spark, link, frames, lost) -> None:
    found = link.lost(_aborted(spark, _thrown(spark, spark.sparkContext._jvm.java.io.EOFException(), frames)))
    assert isinstance(found, EngineProcessLost) if lost else found is None, found
    if lost:
        assert f"({link.who}, killed or crashed; java.io.EOFException: no message)" in str(found)


def test_other_failures_of_a_process_are_reported_not_ridden_out(spark) -> None:
    state = _thrown(spark, spark.sparkContext._jvm.java.lang.IllegalStateException("bad state"), [TASK_READER])
    assert TASK_WORKER.lost(_aborted(spark, state)) is None
