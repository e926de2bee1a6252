"""Spark's Python daemon for the compactor: the workers it forks start with the compactor's code loaded.

Spark runs Python tasks in workers forked from a daemon (pyspark.daemon), and ends a worker that has been
idle for a minute. Every new worker imported numba, pyarrow and confluent-kafka and loaded the log codec's
and the offset map's compiled machine code before its first record, paid again after every idle minute,
with its own copy of the compiled code in each worker (bench/README.md has the figures). This daemon does that once, before
it forks, by running a tiny log through append, a cleaning pass and a read; every worker then starts
ready, and the loaded pages are shared between workers. streaming.spark.session selects it with
spark.python.daemon.module.

A process that forks must have no other thread, or the child inherits locks that no thread will release
(pyspark.daemon imports nothing heavy for that reason). Two libraries start a helper thread when they are
loaded: OpenBLAS (numpy) and the jemalloc that pyarrow bundles. The compactor does no linear algebra and
pyarrow allocates through mimalloc, so the daemon turns both threads off before it imports them, and
refuses to start if any thread but its own is running after the preload.

What the preload made is frozen out of the cyclic collector (gc.freeze) before the first fork: pyspark's
worker collects after every task, and each full collection walked the daemon's hundred thousand objects
(numba's above all), writing to every page it touched and so unsharing it (bench/README.md).
"""

from __future__ import annotations

import os

os.environ["OPENBLAS_NUM_THREADS"] = "1"  # set, not defaulted: a forking process can have no helper threads
os.environ["JE_ARROW_MALLOC_CONF"] = "background_thread:false"

# Everything below is imported after those settings, which the libraries read when they load.
import gc
import sys
import tempfile
import threading

from pyspark import daemon

from streaming.job import append, stage_task  # noqa: F401 (what every task imports)
from streaming.cleaner import CompactionConfig, LogCleanerManager
from streaming.partition_id import PartitionId
from streaming.log import PartitionLog, batch_from_records, make_record
from streaming.spark.source import ingest  # noqa: F401 (the source's reads run in these workers)

TASK_WORKER = "pyspark.worker"  # the worker module that runs tasks (Spark passes the module to the daemon)


def preload() -> None:
    """Append, clean and read a three-record log in a scratch directory: every compiled path once."""
    config = CompactionConfig(min_cleanable_dirty_ratio=0.0)
    with tempfile.TemporaryDirectory(prefix="kcompact-daemon-") as scratch:
        plog = PartitionLog(scratch, config.log_config, jitter_seed="preload")
        records = [make_record(0, b"a", b"1", 0), make_record(1, b"a", None, 1, [("h", b"\0" * 8)]),
                   make_record(2, b"b", b"2", 2)]
        plog.append(batch_from_records(records), 10)
        plog.roll()
        LogCleanerManager(config).clean_partition(PartitionId("preload", 0), plog, now_ms=10)
        list(plog.read())


def threads() -> list[str]:
    """The names of this process's threads, native ones included where /proc lists them (Linux)."""
    if not os.path.isdir("/proc/self/task"):
        return [t.name for t in threading.enumerate()]
    names = []
    for tid in os.listdir("/proc/self/task"):
        with open(f"/proc/self/task/{tid}/comm") as f:
            names.append(f.read().strip())
    return names


if __name__ == "__main__":
    if sys.argv[1:2] in ([], [TASK_WORKER]):  # not the daemons of Spark's data source planning workers
        preload()
    if len(threads()) != 1:
        raise SystemExit(f"kcompact's Spark daemon would fork with other threads running: {threads()}")
    gc.freeze()
    daemon.manager()
