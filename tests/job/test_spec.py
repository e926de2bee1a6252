"""Config resolution at start-up: Kafka's defaults, then what the source topic sets, then --config."""

from __future__ import annotations

import pytest

from streaming.cleaner import ConfigError, Strategy
from streaming.job.spec import JobSpec, load_saved, resolve_compaction_config, saved_compaction_config, \
    timestamp_acceptance


def test_the_command_line_wins_over_the_topic_which_wins_over_kafkas_defaults() -> None:
    topic = {"min.compaction.lag.ms": "5000", "segment.ms": "60000", "retention.ms": "-1"}
    c = resolve_compaction_config(topic, "orders", {"segment.ms": "1000", "compaction.strategy": "timestamp"})
    assert (c.min_compaction_lag_ms, c.segment_ms, c.compaction_strategy) == (5000, 1000, Strategy.TIMESTAMP)
    assert c.delete_retention_ms == 86_400_000, "what neither sets keeps Kafka's default"


def test_a_source_topic_that_is_not_compacted_is_compacted_all_the_same() -> None:
    c = resolve_compaction_config({"cleanup.policy": "delete", "segment.ms": "7"}, "events", {})
    assert c.cleanup_policy == "compact" and c.segment_ms == 7


def test_a_bad_value_on_the_topic_is_named_with_the_topic() -> None:
    with pytest.raises(ConfigError) as err:
        resolve_compaction_config({"min.cleanable.dirty.ratio": "2"}, "orders", {})
    assert err.value.key == "min.cleanable.dirty.ratio" and "as set on source topic 'orders'" in str(err.value)


def test_a_bad_command_line_value_is_named() -> None:
    with pytest.raises(ConfigError) as err:
        resolve_compaction_config({}, "orders", {"segment.ms": "soon"})
    assert err.value.key == "segment.ms"


def test_the_sink_takes_the_sources_timestamp_acceptance_and_nothing_else() -> None:
    explicit = {"message.timestamp.after.max.ms": "9223372036854775807", "message.timestamp.type": "CreateTime",
                "segment.ms": "100", "retention.ms": "-1"}
    assert timestamp_acceptance(explicit) == {"message.timestamp.after.max.ms": "9223372036854775807",
                                              "message.timestamp.type": "CreateTime"}


def test_the_saved_spec_gives_back_the_config_without_secrets(tmp_path) -> None:
    config = resolve_compaction_config({"segment.ms": "100"}, "orders", {"compaction.strategy": "header",
                                                                         "compaction.strategy.header": "v"})
    JobSpec("b:1", "orders", "b:2", "orders.c", str(tmp_path), config, sink_kafka={"sasl.password": "s3cret"}).save()
    assert saved_compaction_config(str(tmp_path)) == config
    assert "s3cret" not in str(load_saved(str(tmp_path)))
