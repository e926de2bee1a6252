"""A Spark batch source for the compacted state: ``spark.read.format("kcompact").load(STATE_DIR)`` gives one
row per live key, in the columns of Spark's Kafka source.

Each partition log is one Spark partition, read on an executor (streaming.table.state_reader). Filters on
topic and partition are taken by the source and prune the logs read, so a query for one partition reads
one log. Options: topic (a topic, or several separated by commas), includeTombstones, asOfOffsets (JSON per
partition, like Spark's endingOffsets: the state holds the records below them; -1 as now), asOfTimestamp
(milliseconds since the epoch), valueFormat (binary, string, json or debezium, as a snapshot's),
jsonNullDeletes and fromSchema (all or latest, as a snapshot's --from-schema).

With json or debezium, the columns are inferred where the query is planned, from every log's live rows, as
a snapshot infers them; each task then gives its rows in those columns. A column's default (a change
stream's column added with one) travels to the tasks in the Spark field's metadata. Spark's decimals hold
38 digits: a wider one is its exact text.
"""

from __future__ import annotations

from enum import Enum
from typing import Any, Iterator, Sequence

import pyarrow as pa
from pyspark.sql import SparkSession
from pyspark.sql.datasource import DataSource, DataSourceReader, EqualTo, Filter, In, InputPartition
from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_schema
from pyspark.sql.types import StructField, StructType

from streaming.errors import UsageError
from streaming.spark.source.options import boolean_option
from streaming.table.column_defaults import DEFAULT_KEY, defaults_of, restored
from streaming.table.connect_types import MAX_PRECISION
from streaming.table.evolution import conformed
from streaming.table.rows import SPARK_DDL
from streaming.table.snapshot import partition_states
from streaming.table.state_reader import LogToRead, TableQuery, logs_to_read, parse_as_of_offsets, read_log
from streaming.table.values import FromSchema, TableShape, ValueFormat, ValueSpec

SOURCE_NAME = "kcompact"
SPARK_DECIMAL = MAX_PRECISION  # Spark's widest decimal
DEFAULT = DEFAULT_KEY.decode()  # a Spark field's metadata key: where the column began (its default)
PUSHDOWN = "spark.sql.python.filterPushdown.enabled"


class LogPartition(InputPartition):
    def __init__(self, log: LogToRead) -> None:
        super().__init__(str(log.pid))
        self.log = log


def _state_uri(options: dict[str, str]) -> str:
    state_uri = options.get("path") or ""
    if not state_uri:
        raise UsageError("the kcompact source reads a state dir: spark.read.format(\"kcompact\").load(STATE_DIR)")
    return state_uri


def _query(options: dict[str, str]) -> TableQuery:
    timestamp = options.get("asOfTimestamp")
    if timestamp is not None and not timestamp.strip().lstrip("-").isdigit():
        raise UsageError(f"option asOfTimestamp is milliseconds since the epoch, not {timestamp!r}")
    topics = options.get("topic")
    return TableQuery(
        topics=frozenset(t.strip() for t in topics.split(",")) if topics else None,
        as_of_offsets=parse_as_of_offsets(options["asOfOffsets"]) if "asOfOffsets" in options else {},
        as_of_timestamp_ms=int(timestamp) if timestamp is not None else None,
        tombstones=boolean_option("includeTombstones", options.get("includeTombstones"), False))


def _values(options: dict[str, str]) -> ValueSpec:
    return ValueSpec(_choice(options, "valueFormat", ValueFormat.BINARY),
                     boolean_option("jsonNullDeletes", options.get("jsonNullDeletes"), False),
                     _choice(options, "fromSchema", FromSchema.ALL))


def _choice(options: dict[str, str], option: str, default: Enum) -> Any:
    kind = type(default)
    name = options.get(option, default.value)
    try:
        return kind(name)
    except ValueError:
        raise UsageError(f"option {option} is one of {', '.join(f.value for f in kind)}, not {name!r}") from None


def _inferred(state_uri: str, query: TableQuery, spec: ValueSpec) -> StructType:
    """The table's columns for a value format with a schema to infer: every log's live rows are read, one
    at a time, as a snapshot reads them (twice with fromSchema latest: the newest schema first)."""
    shape = TableShape(spec, None, "the kcompact source", SPARK_DECIMAL)
    if shape.latest:
        for state in partition_states(logs_to_read(state_uri, query), {}):
            shape.learn(state.batches, str(state.pid))
    for state in partition_states(logs_to_read(state_uri, query), {}):
        shape.apply(state.batches, str(state.pid))
    if shape.schema is None:
        raise UsageError(f"valueFormat {spec.format.value}: the state has no values yet to infer the columns from")
    defaults = defaults_of(shape.schema)
    return StructType([StructField(f.name, f.dataType, f.nullable, {DEFAULT: defaults[f.name]} if f.name in defaults else {})
                       for f in from_arrow_schema(shape.schema, prefer_timestamp_ntz=True)])


class StateReader(DataSourceReader):
    def __init__(self, options: dict[str, str], schema: StructType) -> None:
        self.state_uri = _state_uri(options)
        self.query = _query(options)
        self.values = _values(options)
        self.schema = None if self.values.format is ValueFormat.BINARY else restored(
            to_arrow_schema(schema, timezone="UTC"), {f.name: f.metadata[DEFAULT] for f in schema if DEFAULT in f.metadata})
        self.at = self.values.coordinates
        self.pruned: dict[str, frozenset | None] = {self.at.topic: None, self.at.partition: None}  # by pushed filters

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
        topics, partitions = self.pruned[self.at.topic], self.pruned[self.at.partition]
        return [LogPartition(log) for log in logs_to_read(self.state_uri, self.query)
                if (topics is None or log.pid.topic in topics) and (partitions is None or log.pid.partition in partitions)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, LogPartition):  # with no log to read, Spark still reads one empty partition
            return
        if self.schema is None:
            yield from read_log(partition.log)
            return
        shape = TableShape(self.values, self.schema, "the kcompact source", SPARK_DECIMAL)
        batches, where = list(read_log(partition.log)), str(partition.log.pid)
        if shape.latest:  # this log's newest schema; its rows then take the planned (the newest of all) columns
            shape.learn(batches, where)
        # a job that ran on since planning may have added columns: the query keeps the ones it planned
        yield from (conformed(b, self.schema) for b in shape.apply(batches, where))


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

    def schema(self) -> str | StructType:
        values = _values(self.options)
        if values.format is ValueFormat.BINARY:
            return SPARK_DDL
        return _inferred(_state_uri(self.options), _query(self.options), values)

    def reader(self, schema: StructType) -> StateReader:
        return StateReader(self.options, schema)
