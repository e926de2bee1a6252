"""Spark's Python workers: tuned for batches."""

from __future__ import annotations

import gc

from streaming.worker_process import BATCH_GC_THRESHOLDS, prepare_task


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
