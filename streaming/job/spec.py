"""Everything a compactor job's tasks need, in one picklable value, and how each topic's config is resolved."""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass, field
from typing import Mapping, Sequence

from streaming.cleaner import CompactionConfig, JobSettings, KEYS_SET_BY_TOPIC, Overrides
from streaming.configuration.settings import Scope
from streaming.cleaner.config import ConfigError
from streaming.errors import JobError, UsageError
from streaming.configuration.subscription import Subscription, select_topics, subscription_from_doc
from streaming.kafka.headers.origin_header import Origins
from streaming.security.redaction import redact
from streaming.log.storage import read_json, write_json
from streaming.state.layout import JOB_FILE, job_file
from streaming.state.stores import StateDir

log = logging.getLogger(__name__)



TOPIC_SCOPES = frozenset({Scope.TOPIC, Scope.CLEANER})  # what a topic's plan keeps; the job's settings are the spec's


@dataclass(frozen=True)
class TopicPlan:
    """One mirrored topic: its sink, its compaction config (its own settings plus --config), its size."""

    source: str
    sink: str
    compaction: CompactionConfig
    partitions: int
    # the sink topic's max.message.bytes as read when the topic was planned (None: not known, e.g. the job may not
    # describe the sink's configs): the emitter's producer is sized by it and no bigger record enters a transaction
    sink_max_message_bytes: int | None = None

    def to_doc(self) -> dict:
        return {"sink": self.sink, "partitions": self.partitions,
                "compaction": self.compaction.to_kafka(TOPIC_SCOPES)}

    @classmethod
    def from_doc(cls, source: str, doc: Mapping, job: JobSettings) -> "TopicPlan":
        config = CompactionConfig.from_mapping({k: v for k, v in doc["compaction"].items() if v != ""})
        return cls(source, doc["sink"], job.over(config), doc["partitions"])


@dataclass(frozen=True)
class JobMapping:
    """What a state dir belongs to: its logs and its emission progress mean nothing for another mapping."""

    source_bootstrap: str
    subscription: Subscription
    sink_bootstrap: str
    sink_template: str

    @property
    def one_cluster(self) -> bool:
        """The sink was given no address of its own (it is then reached as the source is)."""
        return self.sink_bootstrap == self.source_bootstrap

    def describe(self) -> str:
        return (f"{self.subscription.describe()} on {self.source_bootstrap} -> '{self.sink_template}' on "
                f"{self.sink_bootstrap}")

    def to_doc(self) -> dict:
        return {"source_bootstrap": self.source_bootstrap, "selection": self.subscription.to_doc(),
                "sink_bootstrap": self.sink_bootstrap, "sink_template": self.sink_template}

    @classmethod
    def from_doc(cls, doc: Mapping) -> "JobMapping":
        return cls(doc["source_bootstrap"], subscription_from_doc(doc["selection"]), doc["sink_bootstrap"],
                   doc["sink_template"])


def new_job_id() -> str:
    """A job's identity, made at its first run and kept in its state dir: its transactional ids carry it, so two
    jobs writing to one sink cluster never fence each other."""
    return uuid.uuid4().hex[:12]


@dataclass(frozen=True)
class JobSpec:
    mapping: JobMapping
    state_dir: str
    topics: dict[str, TopicPlan]  # by source topic: the ones the job mirrors now (topic sync adds to them)
    source_kafka: dict[str, str] = field(default_factory=dict, repr=False)  # may hold credentials
    sink_kafka: dict[str, str] = field(default_factory=dict, repr=False)
    settings: JobSettings = JobSettings()
    dead_letter_topic: str | None = None
    dead_letter_max_message_bytes: int | None = None  # the dead-letter topic's, as read at start (None: not known)
    max_passes_per_trigger: int = 16
    trigger_interval_ms: int = 5000  # a tombstone's erasure is due max.compaction.lag.ms plus one trigger after it
    kafka_native: bool = True  # records take the native path where it can run (--kafka-native)
    job_id: str = field(default_factory=new_job_id)
    # Kafka's ids of the two clusters, as read at start: each sink record names where it came from, and a
    # record that came from the sink's cluster is not emitted (streaming.kafka.headers.origin_header)
    source_cluster_id: str = ""
    sink_cluster_id: str = ""
    config: Mapping[str, str] = field(default_factory=dict)  # --config as given: a promote's last run keeps it

    @property
    def source_bootstrap(self) -> str:
        return self.mapping.source_bootstrap

    @property
    def sink_bootstrap(self) -> str:
        return self.mapping.sink_bootstrap

    @property
    def origins(self) -> Origins:
        return Origins(self.source_cluster_id, self.sink_cluster_id)

    def save(self, state: StateDir) -> None:
        """The job's settings beside its logs (secrets redacted) so status, dump and translate work offline."""
        doc = {"job_id": self.job_id, "mapping": self.mapping.to_doc(), "settings": self.settings.to_kafka(),
               "dead_letter_topic": self.dead_letter_topic,
               "source_cluster_id": self.source_cluster_id, "sink_cluster_id": self.sink_cluster_id,
               "trigger_interval_ms": self.trigger_interval_ms, "config": dict(self.config),
               "topics": {t: p.to_doc() for t, p in sorted(self.topics.items())},
               "source_kafka": redact(self.source_kafka), "sink_kafka": redact(self.sink_kafka)}
        write_json(state.storage, job_file(state), doc, indent=2)


@dataclass(frozen=True)
class SavedJob:
    """What a state dir says of its job (kcompact.json): enough for status, dump, translate and sync-groups
    to work while the job is down. The clusters' credentials are never in it."""

    mapping: JobMapping
    topics: dict[str, TopicPlan]  # by source topic
    settings: JobSettings = JobSettings()
    dead_letter_topic: str | None = None
    trigger_interval_ms: int = 5000
    # The job's client settings as saved: references to secrets as written, a secret given as a value redacted
    source_kafka: Mapping[str, str] = field(default_factory=dict)
    sink_kafka: Mapping[str, str] = field(default_factory=dict)
    job_id: str | None = None  # None: a state dir of a kcompact from before jobs had one
    config: Mapping[str, str] = field(default_factory=dict)  # the job's --config
    source_cluster_id: str | None = None  # None: saved by a kcompact from before records named their origin
    sink_cluster_id: str | None = None

    @classmethod
    def from_doc(cls, doc: Mapping) -> "SavedJob":
        settings = JobSettings.from_kafka(doc.get("settings", {}))
        return cls(JobMapping.from_doc(doc["mapping"]),
                   {t: TopicPlan.from_doc(t, d, settings) for t, d in doc["topics"].items()}, settings,
                   doc.get("dead_letter_topic"), doc.get("trigger_interval_ms", 5000), doc.get("source_kafka", {}),
                   doc.get("sink_kafka", {}), doc.get("job_id"), doc.get("config", {}),
                   source_cluster_id=doc.get("source_cluster_id"), sink_cluster_id=doc.get("sink_cluster_id"))

    def principals(self) -> frozenset[str]:
        """The principals the job itself logs in as on its two clusters."""
        # the state reports load no Kafka client
        from streaming.kafka.access.permissions import principal_of  # noqa: PLC0415

        return frozenset(principal_of(s) for s in (self.source_kafka, self.sink_kafka))

    def selected(self, selectors: Sequence[str] | None, state_dir: str) -> dict[str, TopicPlan]:
        """The plans of the topics ``selectors`` name (--topic: each a name, or a regular expression matched
        whole; None: every topic); one that selects nothing is a usage error naming what the job mirrors."""
        if not selectors:
            return dict(self.topics)
        return {t: self.topics[t] for t in select_topics(self.topics, selectors, f"mirrored by the job of {state_dir}")}

    def plan_of(self, topic: str, state_dir: str) -> TopicPlan:
        """The plan of a source topic the job mirrors; any other topic is a usage error naming the ones it does."""
        plan = self.topics.get(topic)
        if plan is None:
            raise UsageError(f"topic {topic!r} is not mirrored by the job of {state_dir}; it mirrors "
                             f"{', '.join(sorted(self.topics)) or 'nothing yet'}")
        return plan


def find_saved(state: StateDir) -> SavedJob | None:
    """The saved job, or None in a state dir no job has used yet."""
    doc = read_json(state.storage, job_file(state))
    if doc is None:
        return None
    if "mapping" not in doc:
        raise JobError(f"{state.uri} was written by an older kcompact (one topic per state dir); "
                       f"choose a new --state-dir")
    return SavedJob.from_doc(doc)


def job_id_of(state: StateDir) -> str:
    """The identity of the job of a state dir: the one its first run made, or a new one (a new state dir, or one
    from before jobs had one). Only the id is read: the rest of the saved spec was checked before the start
    created anything (the caller's, where it holds the state dir), and is saved anew by it."""
    doc = read_json(state.storage, job_file(state))
    return (doc or {}).get("job_id") or new_job_id()


def load_saved(state: StateDir) -> SavedJob:
    """The saved job of a state dir a job has used; any other dir is an error that says so."""
    saved = find_saved(state)
    if saved is None:
        raise FileNotFoundError(f"{state.uri} holds no compactor state ({JOB_FILE} missing); "
                                f"is it the --state-dir of a kcompact run?")
    return saved


def check_state_dir_mapping(state: StateDir, mapping: JobMapping) -> None:
    """Refuse a state dir that holds another mapping's logs, before anything in it is written."""
    found = find_saved(state)
    if found is None:
        return
    saved = found.mapping
    if saved != mapping:
        raise JobError(f"state dir {state.uri} belongs to another mapping ({saved.describe()}), not "
                       f"{mapping.describe()}; its logs and emission progress are that mapping's. Choose "
                       f"another --state-dir")


# What a broker checks of a record's timestamp: a sink created with the source's values accepts every
# record the source accepted (Kafka refuses one stamped over an hour ahead by default).
JOB_HEADERS_ROOM = 1024  # more than the headers the job adds to a record (its source offset and origin) take
TIMESTAMP_ACCEPTANCE = ("message.timestamp.type", "message.timestamp.before.max.ms",
                        "message.timestamp.after.max.ms")


def sink_topic_settings(explicit: Mapping[str, str]) -> dict[str, str]:
    """A sink topic's configs, from its source's (MirrorMaker 2 syncs topic configs too): the compaction
    settings Kafka knows, the timestamp acceptance and the record size, so the sink accepts every record the
    source did; its max.message.bytes leaves room for the headers the job adds to each record."""
    kafka_keys = (KEYS_SET_BY_TOPIC - {"compaction.strategy", "compaction.strategy.header"}) | set(TIMESTAMP_ACCEPTANCE)
    settings = {**{k: v for k, v in explicit.items() if k in kafka_keys}, "cleanup.policy": "compact"}
    from streaming.kafka.admin import MAX_MESSAGE_BYTES  # noqa: PLC0415 (kcompact status loads no Kafka client)
    if (size := explicit.get(MAX_MESSAGE_BYTES, "")).isdigit():
        settings[MAX_MESSAGE_BYTES] = str(int(size) + JOB_HEADERS_ROOM)
    return settings


def topic_settings(explicit: Mapping[str, str], topic: str) -> dict[str, str]:
    """The compaction settings among what the topic sets."""
    chosen = {k: v for k, v in explicit.items() if k in KEYS_SET_BY_TOPIC}
    policy = chosen.get("cleanup.policy")
    if policy is not None and "compact" not in policy.split(","):
        log.info("source topic %s has cleanup.policy=%s; the compactor compacts it all the same", topic, policy)
        del chosen["cleanup.policy"]
    return chosen


def resolve_compaction_config(explicit: Mapping[str, str], topic: str,
                              overrides: Overrides) -> CompactionConfig:
    """Kafka's defaults, then what the source topic sets (``explicit``), then the command line."""
    from_topic = topic_settings(explicit, topic)
    try:
        base = CompactionConfig.from_mapping(from_topic)
    except ConfigError as exc:
        raise ConfigError(exc.key, f"as set on source topic {topic!r}: {exc}") from None
    return overrides.over(base)
