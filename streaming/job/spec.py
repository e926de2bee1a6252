"""Everything a compactor job's tasks need, in one picklable value, and how it is resolved at start-up."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Mapping

from streaming.cleaner import CompactionConfig, KEYS_SET_BY_TOPIC
from streaming.cleaner.config import ConfigError
from streaming.redaction import redact
from streaming.state.files import read_json, write_json
from streaming.state.layout import JOB_FILE, job_file

log = logging.getLogger(__name__)



@dataclass(frozen=True)
class JobSpec:
    source_bootstrap: str
    source_topic: str
    sink_bootstrap: str
    sink_topic: str
    state_dir: str
    compaction: CompactionConfig
    source_kafka: dict[str, str] = field(default_factory=dict, repr=False)  # may hold credentials
    sink_kafka: dict[str, str] = field(default_factory=dict, repr=False)
    dead_letter_topic: str | None = None
    max_passes_per_trigger: int = 16

    def save(self) -> None:
        """The job's settings beside its logs (secrets redacted) so status and dump work offline."""
        doc = {"source_bootstrap": self.source_bootstrap, "source_topic": self.source_topic,
               "sink_bootstrap": self.sink_bootstrap, "sink_topic": self.sink_topic,
               "dead_letter_topic": self.dead_letter_topic, "compaction": self.compaction.to_kafka(),
               "source_kafka": redact(self.source_kafka), "sink_kafka": redact(self.sink_kafka)}
        write_json(job_file(self.state_dir), doc, indent=2)


def load_saved(state_dir: str) -> dict:
    doc = read_json(job_file(state_dir))
    if doc is None:
        raise FileNotFoundError(f"{state_dir} holds no compactor state ({JOB_FILE} missing); "
                                f"is it the --state-dir of a kcompact run?")
    return doc


def saved_compaction_config(state_dir: str) -> CompactionConfig:
    saved = load_saved(state_dir)["compaction"]
    return CompactionConfig.from_mapping({k: v for k, v in saved.items() if v != ""})


# What a broker checks of a record's timestamp: a sink created with the source's values accepts every
# record the source accepted (Kafka refuses one stamped over an hour ahead by default).
TIMESTAMP_ACCEPTANCE = ("message.timestamp.type", "message.timestamp.before.max.ms",
                        "message.timestamp.after.max.ms")


def timestamp_acceptance(explicit: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in explicit.items() if k in TIMESTAMP_ACCEPTANCE}


def topic_settings(explicit: Mapping[str, str], topic: str) -> dict[str, str]:
    """The compaction settings among what the topic sets."""
    chosen = {k: v for k, v in explicit.items() if k in KEYS_SET_BY_TOPIC}
    policy = chosen.get("cleanup.policy")
    if policy is not None and "compact" not in policy.split(","):
        log.info("source topic %s has cleanup.policy=%s; the compactor compacts it all the same", topic, policy)
        del chosen["cleanup.policy"]
    return chosen


def resolve_compaction_config(explicit: Mapping[str, str], topic: str,
                              overrides: Mapping[str, str]) -> CompactionConfig:
    """Kafka's defaults, then what the source topic sets (``explicit``), then the command line."""
    from_topic = topic_settings(explicit, topic)
    try:
        base = CompactionConfig.from_mapping(from_topic)
    except ConfigError as exc:
        raise ConfigError(exc.key, f"as set on source topic {topic!r}: {exc}") from None
    return CompactionConfig.from_mapping(overrides, base)
