"""Source options: Spark's names, clear errors, and kafka.* settings handed to librdkafka as they are."""

from __future__ import annotations

import pytest

from streaming.configuration.subscription import StartingOffsets, Subscribe, SubscribePattern
from streaming.partition_id import PartitionId
from streaming.spark.source.options import KafkaSourceOptions, SourceOptionError
from streaming.spark.source.kafka_source import KafkaStreamReader
from streaming.spark.source.offsets import rate_limit


def test_kafka_options_reach_librdkafka_and_read_committed_is_the_default() -> None:
    o = KafkaSourceOptions.parse({"kafka.bootstrap.servers": "127.0.0.1:1", "subscribe": "a, b",
                                  "kafka.security.protocol": "SASL_SSL", "kafka.sasl.mechanism": "PLAIN",
                                  "kafka.sasl.username": "u", "kafka.sasl.password": "p"})
    assert o.subscription == Subscribe(("a", "b"))
    assert o.client_config == {"bootstrap.servers": "127.0.0.1:1", "security.protocol": "SASL_SSL",
                               "sasl.mechanism": "PLAIN", "sasl.username": "u", "sasl.password": "p",
                               "isolation.level": "read_committed"}


@pytest.mark.parametrize("options,named", [
    ({"subscribe": "t"}, "kafka.bootstrap.servers"),
    ({"kafka.bootstrap.servers": "x"}, "subscribe"),
    ({"kafka.bootstrap.servers": "x", "subscribe": "t", "startingOffsets": "yesterday"}, "startingOffsets"),
    ({"kafka.bootstrap.servers": "x", "subscribe": "t", "startingOffsets": '{"other": {"0": 1}}'}, "startingOffsets"),
    ({"kafka.bootstrap.servers": "x", "subscribe": "t", "maxOffsetsPerTrigger": "0"}, "maxOffsetsPerTrigger"),
    ({"kafka.bootstrap.servers": "x", "subscribe": "t", "failOnDataLoss": "maybe"}, "failOnDataLoss"),
    ({"kafka.bootstrap.servers": "x", "subscribe": "t", "kafka.group.id": "g"}, "kafka.group.id"),
    ({"kafka.bootstrap.servers": "x", "subscribe": "t", "subscribePattern": "t.*"}, "subscribePattern"),
    ({"kafka.bootstrap.servers": "x", "subscribePattern": "(unclosed"}, "subscribePattern"),
    ({"kafka.bootstrap.servers": "x", "subscribePattern": "orders-.*", "startingOffsets": '{"users": {"0": 1}}'},
     "startingOffsets"),
])
def test_invalid_options_are_named(options: dict, named: str) -> None:
    with pytest.raises(SourceOptionError, match=named.replace(".", r"\.")):
        KafkaSourceOptions.parse(options)


def test_a_pattern_subscribes_whole_matches_and_no_internal_topic() -> None:
    o = KafkaSourceOptions.parse({"kafka.bootstrap.servers": "x", "subscribePattern": "orders-.*",
                                  "startingOffsets": '{"orders-eu": {"0": 5}}'})
    assert o.subscription == SubscribePattern("orders-.*")
    assert o.starting_offsets == StartingOffsets(None, {PartitionId("orders-eu", 0): 5})
    matches = o.subscription.matches
    assert matches("orders-eu") and not matches("old-orders-eu") and not matches("users")
    assert not KafkaSourceOptions.parse({"kafka.bootstrap.servers": "x", "subscribePattern": ".*"}).subscription.matches(
        "__consumer_offsets")


@pytest.mark.integration
def test_missing_topic_is_a_clear_error(bootstrap_servers: str) -> None:
    reader = KafkaStreamReader(KafkaSourceOptions.parse({"kafka.bootstrap.servers": bootstrap_servers,
                                                         "subscribe": "no-such-topic-anywhere"}))
    try:
        with pytest.raises(SourceOptionError, match="no-such-topic-anywhere.*does not exist"):
            reader.initialOffset()
    finally:
        reader.stop()


def test_rate_limit_is_proportional_and_never_starves_a_partition() -> None:
    start = {("t", 0): 0, ("t", 1): 0, ("t", 2): 100}
    until = {("t", 0): 1000, ("t", 1): 10, ("t", 2): 100}
    limited = rate_limit(start, until, 100)
    assert limited[("t", 0)] == 99 and limited[("t", 1)] == 1 and limited[("t", 2)] == 100
    assert rate_limit(start, until, 10**9) == until
