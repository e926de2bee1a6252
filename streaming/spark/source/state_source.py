"""A Spark batch source for the compacted state: ``spark.read.format("kcompact").load(STATE_DIR)`` gives one
row per live key, in the columns of Spark's Kafka source.

Each partition log is one Spark partition, read on an executor (streaming.table.state_reader). Filters on
topic and partition are taken by the source and prune the logs read, so a query for one partition reads
one log. Options: topic (a topic, or several separated by commas), includeTombstones, asOfOffsets (JSON per
partition, like Spark's endingOffsets: the state holds the records below them; -1 as now) and
asOfTimestamp (milliseconds since the epoch).
"""

from __future__ import annotations

from typing import Iterator, Sequence

import pyarrow as pa
from pyspark.sql import SparkSession
from pyspark.sql.datasource import DataSource, DataSourceReader, EqualTo, Filter, In, InputPartition

from streaming.errors import UsageError
from streaming.spark.source.options import boolean_option
from streaming.table.rows import SPARK_DDL
from streaming.table.state_reader import LogToRead, TableQuery, logs_to_read, parse_as_of_offsets, read_log

SOURCE_NAME = "kcompact"
PUSHDOWN = "spark.sql.python.filterPushdown.enabled"


class LogPartition(InputPartition):
    def __init__(self, log: LogToRead) -> None:
        super().__init__(str(log.pid))
        self.log = log


class StateReader(DataSourceReader):
    def __init__(self, options: dict[str, str]) -> None:
        self.state_uri = options.get("path") or ""
        if not self.state_uri:
            raise UsageError("the kcompact source reads a state dir: spark.read.format(\"kcompact\").load(STATE_DIR)")
        timestamp = options.get("asOfTimestamp")
        if timestamp is not None and not timestamp.strip().lstrip("-").isdigit():
            raise UsageError(f"option asOfTimestamp is milliseconds since the epoch, not {timestamp!r}")
        topics = options.get("topic")
        self.query = TableQuery(
            topics=frozenset(t.strip() for t in topics.split(",")) if topics else None,
            as_of_offsets=parse_as_of_offsets(options["asOfOffsets"]) if "asOfOffsets" in options else {},
            as_of_timestamp_ms=int(timestamp) if timestamp is not None else None,
            tombstones=boolean_option("includeTombstones", options.get("includeTombstones"), False))
        self.pruned: dict[str, frozenset | None] = {"topic": None, "partition": None}  # by pushed filters

    def pushFilters(self, filters: list[Filter]) -> Iterator[Filter]:
        """topic and partition equal to a value or in a list narrow the logs read; Spark keeps every other
        filter. A value no log has selects nothing, as a filter does (the topic option refuses it instead)."""
        for f in filters:
            column = f.attribute[0] if isinstance(f, (EqualTo, In)) and len(f.attribute) == 1 else None
            if column not in self.pruned:
                yield f
                continue
            values = frozenset(f.value if isinstance(f, In) else (f.value,))
            previous = self.pruned[column]
            self.pruned[column] = values if previous is None else previous & values

    def partitions(self) -> Sequence[InputPartition]:
        topics, partitions = self.pruned["topic"], self.pruned["partition"]
        return [LogPartition(log) for log in logs_to_read(self.state_uri, self.query)
                if (topics is None or log.pid.topic in topics) and (partitions is None or log.pid.partition in partitions)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if isinstance(partition, LogPartition):  # with no log to read, Spark still reads one empty partition
            yield from read_log(partition.log)


def register(spark: SparkSession) -> None:
    """Make ``spark.read.format("kcompact")`` read the state in this session. Spark refuses a Python source
    that takes filters unless its filter pushdown is on, so it is turned on here too."""
    spark.conf.set(PUSHDOWN, "true")
    spark.dataSource.register(StateDataSource)


class StateDataSource(DataSource):
    """Registered by register(spark); read with ``spark.read.format("kcompact").load(STATE_DIR)``."""

    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def schema(self) -> str:
        return SPARK_DDL

    def reader(self, schema) -> StateReader:
        return StateReader(self.options)
