"""Spark's Python workers: forked from the compactor's daemon with its code loaded, tuned for batches."""

from __future__ import annotations

import gc
import os
import subprocess
import sys

from streaming.job.task import BATCH_GC_THRESHOLDS, prepare_task


def test_prepare_task_runs_the_cyclic_collector_less_often_but_still_runs_it() -> None:
    before = gc.get_threshold()
    try:
        prepare_task()
        assert gc.get_threshold() == BATCH_GC_THRESHOLDS
        assert gc.isenabled()
        cycle: list = []
        cycle.append(cycle)
        del cycle
        assert gc.collect() >= 1
    finally:
        gc.set_threshold(*before)


def test_daemon_preload_leaves_one_thread_to_fork_with() -> None:
    """numpy's OpenBLAS and pyarrow's jemalloc each start a thread when loaded unless told not to."""
    out = subprocess.run([sys.executable, "-c", "import sys, streaming.spark.daemon as d; d.preload(); "
                          "print(d.threads(), 'streaming.log.codec' in sys.modules)"],
                         capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.split() == ["['python']", "True"], out.stderr


def _worker_facts(_):
    import sys as worker_sys
    with open(f"/proc/{os.getppid()}/cmdline", "rb") as f:
        parent = f.read().replace(b"\0", b" ").decode()
    return parent, "streaming.log.codec" in worker_sys.modules, gc.get_freeze_count(), os.environ.get("OPENBLAS_NUM_THREADS")


def test_spark_tasks_run_in_workers_forked_from_the_preloaded_daemon(spark) -> None:
    facts = spark.sparkContext.parallelize(range(2), 2).map(_worker_facts).collect()
    for parent, codec_loaded, frozen, blas_threads in facts:
        assert "-m streaming.spark.daemon pyspark.worker" in parent
        assert codec_loaded, "the codec was imported by the daemon, before the worker was forked"
        assert frozen > 10_000, "what the daemon preloaded is frozen out of the cyclic collector"
        assert blas_threads == "1"
