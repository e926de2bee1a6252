"""The SparkSession the compactor runs in, with the Kafka source registered."""

from __future__ import annotations

import os
import sys

from pyspark import SparkConf, SparkContext
from pyspark.sql import SparkSession

from streaming.spark.source.kafka_source import KafkaDataSource
from streaming.spark.source.options import KafkaSourceOptions
from streaming.spark.home import choose_spark_home

# Rows per Arrow batch that Spark hands the appender's mapInArrow (Spark's default is 10,000): as many as the
# source reads per batch, so Spark passes the source's batches on whole instead of cutting each into five,
# each with its own IPC message and Python-side handling. About 10 MB per batch for 150-byte records.
ARROW_BATCH_ROWS = KafkaSourceOptions.records_per_batch


def build_session(app_name: str = "kcompact", master: str | None = None, ui: bool = False,
                  driver_memory: str = "1g", extra: dict[str, str] | None = None) -> SparkSession:
    """A session for the compactor. Executors run this interpreter unless told otherwise, so they import
    the same package. Under spark-submit, what was submitted (--master, --conf) wins over these defaults;
    an explicit ``master`` (--spark-master) wins over everything."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    submitted = _submitted()
    if submitted is None:
        choose_spark_home()
    defaults = {"spark.master": os.environ.get("KCOMPACT_SPARK_MASTER", "local[2]"),
                "spark.ui.enabled": str(ui).lower(), "spark.ui.showConsoleProgress": "false",
                "spark.driver.memory": driver_memory, "spark.sql.shuffle.partitions": "2",
                "spark.sql.execution.arrow.pyspark.enabled": "true",
                "spark.sql.execution.arrow.maxRecordsPerBatch": str(ARROW_BATCH_ROWS),
                "spark.python.worker.reuse": "true", "spark.python.daemon.module": "streaming.spark.daemon"}
    builder = SparkSession.builder.appName(app_name)
    for k, v in defaults.items():
        if submitted is None or not submitted.contains(k):
            builder = builder.config(k, v)
    if master:
        builder = builder.master(master)
    for k, v in (extra or {}).items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    spark.dataSource.register(KafkaDataSource)
    return spark


def _submitted() -> SparkConf | None:
    """The settings spark-submit launched this driver with; None when this process launches Spark itself."""
    if not os.environ.get("PYSPARK_GATEWAY_PORT"):
        return None
    SparkContext._ensure_initialized()  # connects to spark-submit's JVM, so SparkConf reads what it was given
    return SparkConf()
