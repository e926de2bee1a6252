"""Config resolution at start-up: Kafka's defaults, then what the source topic sets, then --config."""

from __future__ import annotations

import json

import pytest

from streaming.cleaner import ConfigError, JobSettings, KeylessPolicy, Overrides, Strategy
from streaming.erasure.events import AuditKeys
from streaming.errors import JobError
from streaming.job.spec import (JobMapping, JobSpec, TopicPlan, check_state_dir_mapping, job_id_of, load_saved,
                                resolve_compaction_config, sink_topic_settings)
from streaming.configuration.subscription import Subscribe, SubscribePattern
from streaming.state.stores import open_state_dir


def test_the_command_line_wins_over_the_topic_which_wins_over_kafkas_defaults() -> None:
    topic = {"min.compaction.lag.ms": "5000", "segment.ms": "60000", "retention.ms": "-1"}
    c = resolve_compaction_config(topic, "orders",
                                  Overrides.parse({"segment.ms": "1000", "compaction.strategy": "timestamp"}))
    assert (c.min_compaction_lag_ms, c.segment_ms, c.compaction_strategy) == (5000, 1000, Strategy.TIMESTAMP)
    assert c.delete_retention_ms == 86_400_000, "what neither sets keeps Kafka's default"


def test_a_source_topic_that_is_not_compacted_is_compacted_all_the_same() -> None:
    c = resolve_compaction_config({"cleanup.policy": "delete", "segment.ms": "7"}, "events", Overrides.parse({}))
    assert c.cleanup_policy == "compact" and c.segment_ms == 7


def test_a_bad_value_on_the_topic_is_named_with_the_topic() -> None:
    with pytest.raises(ConfigError) as err:
        resolve_compaction_config({"min.cleanable.dirty.ratio": "2"}, "orders", Overrides.parse({}))
    assert err.value.key == "min.cleanable.dirty.ratio" and "as set on source topic 'orders'" in str(err.value)


def test_a_bad_command_line_value_is_named() -> None:
    with pytest.raises(ConfigError) as err:
        resolve_compaction_config({}, "orders", Overrides.parse({"segment.ms": "soon"}))
    assert err.value.key == "segment.ms"


def test_a_sink_takes_its_sources_compaction_timestamp_and_size_configs_and_is_compacted() -> None:
    """Its max.message.bytes with room for the job's headers: a record the source took fits in the sink."""
    explicit = {"message.timestamp.after.max.ms": "9223372036854775807", "message.timestamp.type": "CreateTime",
                "segment.ms": "100", "retention.ms": "-1", "cleanup.policy": "delete", "max.message.bytes": "5242880"}
    assert sink_topic_settings(explicit) == {"message.timestamp.after.max.ms": "9223372036854775807",
                                             "message.timestamp.type": "CreateTime", "segment.ms": "100",
                                             "cleanup.policy": "compact", "max.message.bytes": str(5242880 + 1024)}


MAPPING = JobMapping("b:1", SubscribePattern("orders.*"), "b:2", "{topic}.c")


def test_the_saved_spec_gives_back_each_topics_plan_without_secrets(tmp_path) -> None:
    config = resolve_compaction_config({"segment.ms": "100"}, "orders", Overrides.parse(
        {"compaction.strategy": "header", "compaction.strategy.header": "v"}))
    plans = {"orders": TopicPlan("orders", "orders.c", config, 3)}
    state = open_state_dir(str(tmp_path))
    JobSpec(MAPPING, str(tmp_path), plans, sink_kafka={"sasl.password": "s3cret"}).save(state)
    saved = load_saved(state)
    assert saved.topics == plans and saved.mapping == MAPPING
    assert "s3cret" not in (tmp_path / "kcompact.json").read_text()


def test_the_job_wide_settings_are_saved_once_for_the_job_and_laid_over_every_topic(tmp_path) -> None:
    overrides = Overrides.parse({"erase.audit.keys": "off", "compaction.keyless.policy": "fail", "segment.ms": "9",
                                 "emit.transaction.records": "100000", "emit.transaction.ms": "2000"})
    plans = {t: TopicPlan(t, f"{t}.c", resolve_compaction_config({}, t, overrides), 1) for t in ("a", "b")}
    state = open_state_dir(str(tmp_path))
    JobSpec(MAPPING, str(tmp_path), plans, settings=overrides.job).save(state)
    doc = json.loads((tmp_path / "kcompact.json").read_text())
    assert doc["settings"] == {"compaction.keyless.policy": "fail", "erase.audit.keys": "off",
                               "emit.transaction.records": "100000", "emit.transaction.ms": "2000"}
    assert not [t for t, d in doc["topics"].items() if set(d["compaction"]) & set(doc["settings"])]
    saved = load_saved(state)
    assert saved.settings == JobSettings(KeylessPolicy.FAIL, AuditKeys.OFF, 100_000) and saved.topics == plans


def test_a_state_dir_of_another_mapping_is_refused_naming_both(tmp_path) -> None:
    state = open_state_dir(str(tmp_path))
    check_state_dir_mapping(state, MAPPING)  # a new state dir belongs to whoever starts it
    JobSpec(MAPPING, str(tmp_path), {}).save(state)
    check_state_dir_mapping(state, MAPPING)
    other = JobMapping("b:1", Subscribe(("orders",)), "b:2", "{topic}.c")
    with pytest.raises(JobError, match=r"belongs to another mapping \(topics matching 'orders\.\*'.*not orders on"):
        check_state_dir_mapping(state, other)


def test_the_clusters_ids_are_saved_and_a_state_dir_from_before_them_reads_without(tmp_path) -> None:
    state = open_state_dir(str(tmp_path))
    JobSpec(MAPPING, str(tmp_path), {}, source_cluster_id="cluster-a", sink_cluster_id="cluster-b").save(state)
    saved = load_saved(state)
    assert (saved.source_cluster_id, saved.sink_cluster_id) == ("cluster-a", "cluster-b")
    doc = json.loads((tmp_path / "kcompact.json").read_text())
    del doc["source_cluster_id"], doc["sink_cluster_id"]
    (tmp_path / "kcompact.json").write_text(json.dumps(doc))
    old = load_saved(state)
    assert (old.source_cluster_id, old.sink_cluster_id) == (None, None)


def test_the_job_keeps_the_id_its_first_run_saved_and_a_state_dir_without_one_gets_a_new_one(tmp_path) -> None:
    state = open_state_dir(str(tmp_path))
    fresh = job_id_of(state)
    assert fresh and fresh != job_id_of(state), "a new state dir: a new id each time it is asked, until one is saved"
    JobSpec(MAPPING, str(tmp_path), {}, job_id="job-1").save(state)
    assert job_id_of(state) == "job-1"
    doc = json.loads((tmp_path / "kcompact.json").read_text())
    del doc["mapping"]  # only the id is read: the rest was checked before the start created anything
    (tmp_path / "kcompact.json").write_text(json.dumps(doc))
    assert job_id_of(state) == "job-1"
    del doc["job_id"]  # a state dir from before jobs had an id
    (tmp_path / "kcompact.json").write_text(json.dumps(doc))
    assert job_id_of(state) not in ("job-1", None)
