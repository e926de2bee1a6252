"""A task's storage work over its partition logs, on a few threads at once where it waits. On an object store a
log's open, its commits and its reads wait on the store's requests, hardly on the CPU: one log after another, a
task of 500 small logs waits 500 times in a row, a round trip each call. The logs are independent (each its own
lock, objects and manifests), so their waits can overlap. On a local disk nothing waits (the task's barrier
took the fsyncs), so its logs go one at a time: threads there only contend for the interpreter. The cleaner's
passes stay one at a time: a worker keeps one offset map, as a Kafka cleaner thread does."""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from typing import Callable, Sequence, TypeVar

T = TypeVar("T")
R = TypeVar("R")

STORE_THREADS = 8  # a store's requests overlap well past this


def threads_for(local: bool) -> int:
    """How many logs' storage work a task runs at once, on a local disk or on an object store."""
    return 1 if local else STORE_THREADS


def each(work: Callable[[T], R], items: Sequence[T], threads: int) -> list[R]:
    """``work`` of every item, in the items' order; the first failure is raised once every item has run (none
    is left half done by a failure beside it)."""
    if threads <= 1 or len(items) <= 1:
        futures = [_done(work, item) for item in items]
    else:
        with ThreadPoolExecutor(min(threads, len(items)), thread_name_prefix="kcompact-task-io") as pool:
            futures = [pool.submit(work, item) for item in items]
    return [f.result() for f in futures]


def _done(work: Callable[[T], R], item: T) -> Future[R]:
    """The work of one item, run here, as a future holds it."""
    future: Future[R] = Future()
    try:
        future.set_result(work(item))
    except Exception as exc:  # noqa: BLE001 (raised by each once the other items have run)
        future.set_exception(exc)
    return future
