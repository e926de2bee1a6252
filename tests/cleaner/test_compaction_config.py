"""CompactionConfig: Kafka's names and defaults; every invalid value is rejected naming its key."""

from __future__ import annotations

from dataclasses import fields

import pytest

from streaming.cleaner import CompactionConfig, ConfigError, JobSettings, KeylessPolicy, Strategy
from streaming.log import LogConfig
from streaming.configuration.settings import SETTINGS, Scope


def test_defaults_are_kafkas() -> None:
    k = CompactionConfig().to_kafka()
    assert k["min.cleanable.dirty.ratio"] == "0.5"
    assert k["min.compaction.lag.ms"] == "0"
    assert k["max.compaction.lag.ms"] == str(2**63 - 1)
    assert k["delete.retention.ms"] == "86400000"
    assert k["segment.ms"] == "604800000"
    assert k["segment.bytes"] == "1073741824"
    assert k["log.cleaner.dedupe.buffer.size"] == "134217728"
    assert k["log.cleaner.io.buffer.load.factor"] == "0.9"
    assert k["log.cleaner.backoff.ms"] == "15000"
    assert k["compaction.strategy"] == "offset"


def test_settings_apply_over_a_base() -> None:
    base = CompactionConfig.from_mapping({"segment.ms": "1000"})
    c = CompactionConfig.from_mapping({"compaction.strategy": "header", "compaction.strategy.header": "ver",
                                       "min.cleanable.dirty.ratio": "0.1", "compaction.keyless.policy": "dead-letter"},
                                      base)
    assert (c.segment_ms, c.compaction_strategy, c.compaction_strategy_header) == (1000, Strategy.HEADER, "ver")
    assert c.min_cleanable_dirty_ratio == 0.1 and c.keyless_policy is KeylessPolicy.DEAD_LETTER


@pytest.mark.parametrize("pairs,key", [
    (["max.compaction.lag.ms=10", "min.compaction.lag.ms=20"], "max.compaction.lag.ms"),
    (["min.cleanable.dirty.ratio=1.5"], "min.cleanable.dirty.ratio"),
    (["min.cleanable.dirty.ratio=-0.1"], "min.cleanable.dirty.ratio"),
    (["compaction.strategy=newest"], "compaction.strategy"),
    (["compaction.strategy=header"], "compaction.strategy.header"),
    (["compaction.strategy.header=v"], "compaction.strategy.header"),
    (["segment.bytes=-1"], "segment.bytes"),
    (["log.cleaner.dedupe.buffer.size=-5"], "log.cleaner.dedupe.buffer.size"),
    (["delete.retention.ms=-1"], "delete.retention.ms"),
    (["segment.ms=soon"], "segment.ms"),
    (["no.such.setting=1"], "no.such.setting"),
    (["cleanup.policy=delete"], "cleanup.policy"),
    (["log.cleaner.io.max.bytes.per.second=0"], "log.cleaner.io.max.bytes.per.second"),
    (["compaction.keyless.policy=ignore"], "compaction.keyless.policy"),
])
def test_invalid_values_are_rejected_naming_the_key(pairs: list[str], key: str) -> None:
    with pytest.raises(ConfigError) as err:
        CompactionConfig.from_mapping(dict(p.split("=", 1) for p in pairs))
    assert err.value.key == key
    assert str(err.value).startswith(key + ":")


def test_log_config_rolls_compacted_logs_at_the_smaller_of_segment_ms_and_max_lag() -> None:
    c = CompactionConfig.from_mapping({"segment.ms": "100000", "max.compaction.lag.ms": "500"})
    assert c.log_config.roll_ms == 500


def test_the_log_config_is_the_compaction_configs_projection_under_the_same_names() -> None:
    config = CompactionConfig(segment_ms=10, max_compaction_lag_ms=20, message_timestamp_after_max_ms=30)
    projected = config.log_config
    shared = [f.name for f in fields(LogConfig) if "setting" in f.metadata]
    assert shared and all(getattr(projected, n) == getattr(config, n) for n in shared)
    assert {f.metadata["setting"] for f in fields(LogConfig) if "setting" in f.metadata} <= \
        {f.metadata["setting"] for f in fields(CompactionConfig)}


def test_the_job_settings_are_the_tables_job_scope() -> None:
    assert {f.metadata["setting"] for f in fields(JobSettings)} == \
        {s.name for s in SETTINGS.values() if s.scope is Scope.JOB}
