"""The SparkSession the compactor runs in, with the Kafka sources and the state source registered."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from typing import Iterator

from pyspark import SparkConf, SparkContext
from pyspark.sql import SparkSession

from streaming.spark import jvm_log
from streaming.spark.class_archive import RECORD_CONF, ClassArchive
from streaming.spark.source.ingest import KafkaIngestSource
from streaming.spark.source.kafka_source import KafkaDataSource
from streaming.spark.source.state_source import register as register_state_source
from streaming.spark.home import choose_spark_home, pyspark_dir
from streaming.spark.submit import driver_address

JAVA_OPTIONS = "spark.driver.extraJavaOptions"
# Spark's Python processes, its planning process for our source included (started for every query): numpy's
# OpenBLAS otherwise starts a thread per core that spins after any call, and the compactor does no linear algebra
WORKER_ENV = {"OPENBLAS_NUM_THREADS": "1"}


def build_session(app_name: str = "kcompact", master: str | None = None, ui: bool = False,
                  driver_memory: str = "1g", extra: dict[str, str] | None = None,
                  log_level: str = "INFO", secret: dict[str, str] | None = None) -> SparkSession:
    """A session for the compactor. Executors run this interpreter unless told otherwise, so they import
    the same package. Under spark-submit, what was submitted (--master, --conf) wins over these defaults;
    an explicit ``master`` (--spark-master) and ``extra`` (--spark-conf) win over everything. The JVM this
    launches logs through Python logging (jvm_log).

    ``secret`` settings are given to the JVM only once it runs: PySpark hands whatever the builder holds when
    it launches the JVM to spark-submit as --conf arguments, which every user of the host sees in ps."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    submitted = _submitted()
    if submitted is None:
        choose_spark_home()
    defaults = {"spark.master": os.environ.get("KCOMPACT_SPARK_MASTER", "local[2]"),
                "spark.ui.enabled": str(ui).lower(), "spark.ui.showConsoleProgress": "false",
                "spark.driver.memory": driver_memory, "spark.sql.shuffle.partitions": "2",
                "spark.sql.execution.arrow.pyspark.enabled": "true",
                "spark.python.worker.reuse": "true", "spark.python.daemon.module": "streaming.spark.daemon",
                # the checkpoint is written through Hadoop's filesystem, which applies its own umask (022)
                "spark.hadoop.fs.permissions.umask-mode": "077",
                **{f"spark.executorEnv.{k}": v for k, v in WORKER_ENV.items()}}
    host = None if submitted is not None else driver_address(master or defaults["spark.master"])
    if host:  # the address the master reaches us at, not the first interface Spark finds (streaming.spark.submit)
        os.environ.setdefault("SPARK_LOCAL_IP", host)
        defaults["spark.driver.host"] = host
    builder = SparkSession.builder.appName(app_name)
    for k, v in defaults.items():
        if submitted is None or not submitted.contains(k):
            builder = builder.config(k, v)
    if master:
        builder = builder.master(master)
    extra = dict(extra or {})
    if submitted is None:
        given = extra.get(JAVA_OPTIONS, "")
        archive = ClassArchive.for_spark_home(os.environ.get("SPARK_HOME") or pyspark_dir())
        extra[JAVA_OPTIONS] = " ".join(o for o in (jvm_log.java_options(log_level), archive.java_options(), given) if o)
        if archive.recording:  # the engine dumps the classes once the query has loaded them
            extra[RECORD_CONF] = str(archive.directory)
    for k, v in extra.items():
        builder = builder.config(k, v)
    with jvm_log.jvm_stderr_to_logging() if submitted is None else contextlib.nullcontext(), _jvm_ignores_sigterm():
        if secret and submitted is None:
            SparkContext._ensure_initialized(conf=SparkConf().setAll(builder._options.items()))  # noqa: SLF001
        for k, v in (secret or {}).items():
            builder = builder.config(k, v)
        spark = builder.getOrCreate()
    spark.dataSource.register(KafkaDataSource)
    spark.dataSource.register(KafkaIngestSource)
    register_state_source(spark)
    return spark


@contextlib.contextmanager
def _jvm_ignores_sigterm() -> Iterator[None]:
    """Launch the JVM with SIGTERM ignored, which it keeps (a JVM installs no handler for a signal ignored at
    its start). A stop sent to the whole process group (systemd's default, `timeout`, a container's init)
    then reaches the driver alone, which finishes its batch and stops Spark itself; the JVM ends with the
    driver, when its gateway closes. SIGKILL still ends it at once."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _submitted() -> SparkConf | None:
    """The settings spark-submit launched this driver with; None when this process launches Spark itself."""
    if not os.environ.get("PYSPARK_GATEWAY_PORT"):
        return None
    SparkContext._ensure_initialized()  # noqa: SLF001 (connects to spark-submit's JVM, so SparkConf reads what it was given)
    return SparkConf()
