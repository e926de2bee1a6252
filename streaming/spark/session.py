"""The SparkSession the compactor runs in, with the Kafka source registered."""

from __future__ import annotations

import os
import sys

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
    """A session for the compactor. Executors run this interpreter, so they import the same package."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    choose_spark_home()
    builder = (SparkSession.builder.appName(app_name)
               .master(master or os.environ.get("KCOMPACT_SPARK_MASTER", "local[2]"))
               .config("spark.ui.enabled", str(ui).lower())
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.driver.memory", driver_memory)
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.sql.execution.arrow.pyspark.enabled", "true")
               .config("spark.sql.execution.arrow.maxRecordsPerBatch", str(ARROW_BATCH_ROWS))
               .config("spark.python.worker.reuse", "true")
               .config("spark.python.daemon.module", "streaming.spark.daemon"))
    for k, v in (extra or {}).items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    spark.dataSource.register(KafkaDataSource)
    return spark
