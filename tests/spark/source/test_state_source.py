"""The Spark batch source kcompact against the reference model: each strategy with and without tombstones,
as-of points inside and outside each log's exact range, filters on topic and partition pruning the logs
read (one Spark partition per log), and a state dir on object storage."""

from __future__ import annotations

import json

import pytest

from streaming.partition_id import PartitionId
from tests.table.state_dirs import STRATEGIES, expected, state_dir, table_rows
from tests.table.test_state_reader import _exact


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return state_dir(str(tmp_path_factory.mktemp("state")))


def _rows(df) -> set[tuple]:
    return table_rows([r.asDict(recursive=True) for r in df.collect()])


@pytest.mark.parametrize("tombstones", ["false", "true"])
@pytest.mark.parametrize("topic", list(STRATEGIES))
def test_each_strategy_reads_as_the_models_winners(spark, model, topic: str, tombstones: str) -> None:
    df = spark.read.format("kcompact").option("topic", topic).option("includeTombstones", tombstones).load(model.uri)
    assert df.columns == ["topic", "partition", "offset", "timestamp", "key", "value", "headers"]
    assert _rows(df) == expected(model, tombstones=tombstones == "true", topics={topic})


def test_filters_on_topic_and_partition_prune_the_logs_read(spark, model) -> None:
    df = spark.read.format("kcompact").load(model.uri)
    assert df.rdd.getNumPartitions() == len(model.records)  # one Spark partition per log
    one = df.where("topic = 'by-time' AND partition = 1")
    assert one.rdd.getNumPartitions() == 1
    assert _rows(one) == {r for r in expected(model) if r[:2] == ("by-time", 1)}
    two = df.where("topic IN ('by-offset', 'by-header') AND partition = 0 AND offset >= 0")
    assert two.rdd.getNumPartitions() == 2
    assert _rows(two) == {r for r in expected(model) if r[0] != "by-time" and r[1] == 0}
    assert df.where("topic = 'no-such-topic'").count() == 0


def test_as_of_offsets_and_times_read_the_state_then_or_are_refused_before_the_exact_range(spark, model) -> None:
    pid = PartitionId("by-header", 0)
    exact, end = _exact(model.uri, pid)
    at = (exact + end) // 2
    df = spark.read.format("kcompact").option("asOfOffsets", json.dumps({pid.topic: {"0": at}})) \
        .option("topic", pid.topic).load(model.uri)
    assert _rows(df) == expected(model, {pid: at}, topics={pid.topic})
    with pytest.raises(Exception, match=f"as-of offset {exact - 1} is before the earliest exact point, offset {exact}"):
        spark.read.format("kcompact").option("asOfOffsets", json.dumps({pid.topic: {"0": exact - 1}})) \
            .load(model.uri).collect()
    late = max(r["timestamp"] for records in model.records.values() for r in records) + 1
    df = spark.read.format("kcompact").option("asOfTimestamp", str(late)).option("topic", "by-time").load(model.uri)
    assert _rows(df) == expected(model, topics={"by-time"})
    with pytest.raises(Exception, match="before the earliest exact point"):
        spark.read.format("kcompact").option("asOfTimestamp", "0").option("topic", "by-time").load(model.uri).collect()


@pytest.mark.integration
def test_a_state_dir_on_object_storage_reads_the_same(spark, s3_server, tmp_path) -> None:
    model = state_dir(s3_server.uri(s3_server.new_bucket()), partitions=1, records=40)
    df = spark.read.format("kcompact").option("includeTombstones", "true").load(model.uri)
    assert _rows(df) == expected(model, tombstones=True)


def test_options_are_checked_in_one_line(spark, model) -> None:
    with pytest.raises(Exception, match="option 'includeTombstones' must be true or false, got 'yes'"):
        spark.read.format("kcompact").option("includeTombstones", "yes").load(model.uri).collect()
    with pytest.raises(Exception, match="option asOfTimestamp is milliseconds since the epoch, not 'noon'"):
        spark.read.format("kcompact").option("asOfTimestamp", "noon").load(model.uri).collect()
    with pytest.raises(Exception, match="option valueFormat is one of binary, string, json, debezium, not 'avro'"):
        spark.read.format("kcompact").option("valueFormat", "avro").load(model.uri).collect()


def test_a_string_value_format_gives_text_values(spark, tmp_path) -> None:
    model = state_dir(str(tmp_path), partitions=1, records=40)
    df = spark.read.format("kcompact").option("valueFormat", "string").load(model.uri)
    assert dict(df.dtypes)["value"] == "string"
    assert {(bytes(r.key), r.value) for r in df.collect()} == {(r[4], r[5].decode()) for r in expected(model)}


def test_register_makes_a_session_with_pushdown_off_read_the_state(spark, model) -> None:
    from streaming.spark.source.state_source import PUSHDOWN, register

    spark.conf.set(PUSHDOWN, "false")  # Spark's default, as in a user's own session
    register(spark)
    assert spark.conf.get(PUSHDOWN) == "true"
    one = spark.read.format("kcompact").load(model.uri).where("partition = 0 AND topic = 'by-offset'")
    assert one.rdd.getNumPartitions() == 1 and _rows(one) == {r for r in expected(model) if r[:2] == ("by-offset", 0)}
