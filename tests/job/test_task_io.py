"""A task's storage work over its logs on a few threads: the results in the logs' order, the waits overlapping,
and a failure raised only once every log's work has run (none is left half done by a failure beside it)."""

from __future__ import annotations

import threading

import pytest

from streaming.job import task_io


def test_results_come_in_the_items_order_from_several_threads() -> None:
    seen: set[str] = set()
    ready = threading.Barrier(4, timeout=10)  # passes only when four items wait at once

    def work(i: int) -> int:
        seen.add(threading.current_thread().name)
        ready.wait()
        return i * i

    assert task_io.each(work, list(range(8)), threads=4) == [i * i for i in range(8)]
    assert len(seen) == 4


def test_one_thread_runs_the_items_in_the_callers_thread() -> None:
    names = task_io.each(lambda _: threading.current_thread().name, [1, 2, 3], threads=1)
    assert names == [threading.current_thread().name] * 3


@pytest.mark.parametrize("threads", [1, 3])
def test_a_failure_is_raised_after_every_other_item_has_run(threads: int) -> None:
    done: list[int] = []

    def work(i: int) -> None:
        if i == 0:
            raise OSError("disk full")
        done.append(i)

    with pytest.raises(OSError, match="disk full"):
        task_io.each(work, list(range(6)), threads=threads)
    assert sorted(done) == [1, 2, 3, 4, 5]
