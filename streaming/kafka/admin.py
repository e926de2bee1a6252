"""Kafka administration: one cluster as the job sees it at start-up (reachable, accepting our credentials,
its topics and their settings), and topic creation for the CLI, the demo and the tests.

librdkafka reports a refused login only through its error callback, while the call at hand fails much
later with a bland transport error. Metadata calls here poll for that callback, so a cluster that
refuses us is named at once, with the reason, instead of after a timeout.
"""

from __future__ import annotations

import logging
import time
import uuid
from dataclasses import dataclass, field
from typing import Callable, Iterable, Mapping, TypeVar

from confluent_kafka import IsolationLevel, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import (AdminClient, ClusterMetadata, ConfigResource, ConfigSource, NewPartitions, NewTopic,
                                  OffsetSpec)

from streaming.errors import JobError
from streaming.names import names_text
from streaming.partition_id import PartitionId
from streaming.utc import utc_text
from streaming.kafka.answers import answers
from streaming.kafka.client_settings import client_settings, refused_because
from streaming.kafka.failures import (as_kafka, is_refused, is_transient, reason, refusal_hint,
                                      refusal_keys, refuses, retrying)

log = logging.getLogger(__name__)

T = TypeVar("T")
MAX_MESSAGE_BYTES = "max.message.bytes"  # a topic's largest record batch: the job reads it, and sizes sinks by it
UNKNOWN_YET_S = 10.0  # how long a topic just created may be unknown to the broker asked about it
WAITING_NOTICE_S = 5.0  # a cluster silent this long at start is said to be awaited, not left to the timeout


def _named_in(text: str, settings: Mapping[str, str]) -> list[str]:
    """The settings librdkafka's own message names (its configuration errors quote the property)."""
    return [k for k in settings if f'"{k}"' in text or f"'{k}'" in text]


@dataclass
class Cluster:
    role: str  # "source" or "sink": named in every error
    bootstrap_servers: str
    settings: dict[str, str] = field(default_factory=dict)
    connect_timeout_s: float = 30.0  # how long a metadata call waits for the cluster to answer
    # Where the settings were given, for an error that names them: the option that gave them all (default:
    # --kafka for the source, --sink-kafka for the sink), and the keys a config file gave, each as written
    # there ("kafka.sasl.password in /etc/kcompact/job.properties").
    given_by: str = ""
    origins: Mapping[str, str] = field(default_factory=dict)
    _refusals: list[KafkaError] = field(default_factory=list, init=False, repr=False)
    _cluster_id: str | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        self.given_by = self.given_by or ("--kafka" if self.role == "source" else "--sink-kafka")
        self.renew_admin()

    def given_with(self, keys: Iterable[str] = ()) -> str:
        """Where ``keys`` (none: every setting) were given: each a config file gave, by its key there, and the
        option for the rest."""
        keys = list(keys) or list(self.settings) or [""]  # no settings at all: the option is still the place
        named = sorted({self.origins[k] for k in keys if k in self.origins})
        rest = [k for k in keys if k not in self.origins]
        return " and ".join(named + ([self.given_by] if rest else []))

    def renew_admin(self) -> None:
        """A new admin client in place of the one in use. One whose coordinator request timed out against a dead
        node is not asked again: librdkafka 2.16 aborts the process (rd_kafka_enq_once_del_source_return) on
        the third such request to one client, and a new client looks its coordinators and leaders up afresh."""
        # The callback holds the list, not self: a client -> cluster -> client cycle would keep the client
        # (and its reconnect attempts) alive until the garbage collector breaks the cycle.
        refusals = self._refusals
        try:
            self.admin = AdminClient(client_settings({**self.settings_with_bootstrap,
                                      "error_cb": lambda err: refusals.append(err) if refuses(err) else None},
                                     refusals_reported=True))
        except KafkaException as exc:  # librdkafka refuses a setting when the client is made, before any request
            refusal = refused_because(self.settings_with_bootstrap)
            why = refusal.why if refusal else exc.args[0].str()
            keys = [refusal.key] if refusal and refusal.key else _named_in(exc.args[0].str(), self.settings)
            raise JobError(f"the {self.role} cluster's settings were refused: {why}. Check "
                           f"{self.given_with(keys)}") from exc

    @property
    def settings_with_bootstrap(self) -> dict[str, str]:
        """The settings a new client of this cluster starts from."""
        return {"bootstrap.servers": self.bootstrap_servers, **self.settings}

    def metadata(self, timeout_s: float | None = None) -> ClusterMetadata:
        """All-topic metadata (naming one topic makes auto-creating brokers create it)."""
        timeout_s = self.connect_timeout_s if timeout_s is None else timeout_s
        started, since_ms = time.monotonic(), int(time.time() * 1000)
        deadline, said = started + timeout_s, False
        while True:
            try:
                return self.admin.list_topics(timeout=max(0.5, min(2.0, timeout_s)))
            except KafkaException as exc:
                self.admin.poll(0)
                if self._refusals:
                    said = self._refusals[-1]
                    hint = refusal_hint(said)
                    keys = [k for k in refusal_keys(said) if k in self.settings]
                    raise JobError(f"the {self.role} cluster at {self.bootstrap_servers} refused the compactor: "
                                   f"{said.str()}. {hint[0].upper() + hint[1:]} in the settings given with "
                                   f"{self.given_with(keys)}") from exc
                if time.monotonic() > deadline:
                    raise ClusterUnreachable(f"the {self.role} cluster at {self.bootstrap_servers} did not answer "
                                             f"within {timeout_s:.0f}s: {exc.args[0].str()}") from exc
                if not said and time.monotonic() - started > WAITING_NOTICE_S:
                    said = True
                    log.warning("waiting for the %s cluster at %s to answer (up to %.0fs): %s; since %s UTC", self.role,
                                self.bootstrap_servers, timeout_s, exc.args[0].str(), utc_text(since_ms))

    def cluster_id(self) -> str:
        """Kafka's id of the cluster: two bootstrap lists name the same cluster exactly when these agree. Asked
        once (a cluster keeps its id for life): the start compares the clusters by it, and the job's records
        name their origin by it."""
        if self._cluster_id is None:
            self.metadata()  # a refusal or an absent cluster is named first
            self._cluster_id = self.answer(
                lambda: self.admin.describe_cluster(request_timeout=30).result(30).cluster_id, "cluster id")
        return self._cluster_id

    def answer(self, call: Callable[[], T], what: str, quiet: bool = False) -> T:
        """A request retried while the cluster passes through a restart or a leader moves (a broker going
        away between the metadata answer and this request) for up to connect_timeout_s, with a new admin
        client between tries (renew_admin). ``quiet``: the waits are DEBUG, for a caller that says itself
        what a failure meant (a sync round beside the job)."""
        return retrying(call, what, self.connect_timeout_s, side=self.role, renew=self.renew_admin,
                        level=logging.DEBUG if quiet else logging.WARNING)

    def partition_count(self, topic: str) -> int:
        t = self.metadata().topics.get(topic)
        if t is None or t.error is not None or not t.partitions:
            raise JobError(f"{self.role} topic {topic!r} does not exist on the {self.role} cluster")
        return len(t.partitions)

    def explicit_settings(self, topic: str) -> dict[str, str]:
        """What the topic itself sets (not broker or static defaults)."""
        return self.explicit_settings_of([topic])[topic]

    def explicit_settings_of(self, topics: list[str]) -> dict[str, dict[str, str]]:
        """What each topic itself sets, in one request however many topics."""
        return {t: {e.name: e.value for e in entries.values()
                    if e.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value and e.value is not None}
                for t, entries in self._describe(topics).items()}

    def _describe(self, topics: list[str]) -> dict[str, dict]:
        """Each topic's config entries, in one request however many topics."""
        def describe():
            futures = self.admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, t) for t in topics])
            return {r.name: f.result(self.connect_timeout_s) for r, f in futures.items()}

        return self.answer(describe, f"configs of topic {topics[0]}" if len(topics) == 1 else
                           f"configs of {len(topics)} topics") if topics else {}

    def topic_configs(self, topic: str, names: Iterable[str]) -> dict[str, str]:
        """The topic's effective values of ``names`` (its own, else the broker's defaults)."""
        return self.topic_configs_of([topic], names)[topic]

    def topic_configs_of(self, topics: list[str], names: Iterable[str]) -> dict[str, dict[str, str]]:
        """topic_configs for many topics, in one request."""
        wanted = list(names)
        return {t: {n: entries[n].value for n in wanted if n in entries and entries[n].value is not None}
                for t, entries in self._describe(topics).items()}

    def max_message_bytes_of(self, topics: list[str]) -> dict[str, int]:
        """Each topic's max.message.bytes (its own, else the broker's default), in one request; {} when the cluster
        refuses the job DescribeConfigs on them (not among the sink's ACLs the job needs: it goes on without)."""
        deadline = time.monotonic() + UNKNOWN_YET_S
        while True:
            try:
                values = self.topic_configs_of(topics, [MAX_MESSAGE_BYTES])
            except KafkaException as exc:
                if exc.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART and time.monotonic() < deadline:
                    time.sleep(0.2)  # a topic just created, not yet known to the broker asked: asked again
                    continue
                if not is_refused(exc):
                    raise
                log.info("the %s cluster does not let the job describe the configs of %s (%s): their "
                         "max.message.bytes is not known, and the producer keeps librdkafka's message.max.bytes",
                         self.role, names_text(sorted(topics)), exc.args[0].str())
                return {}
            return {t: int(v[MAX_MESSAGE_BYTES]) for t, v in values.items() if MAX_MESSAGE_BYTES in v}

    def end_offsets(self, partitions: Iterable[PartitionId], timeout_s: float = 5.0) -> dict[PartitionId, int]:
        """Each partition's last stable offset (the end a read_committed reader can reach), in one request per
        leader however many topics they span."""
        return self._offsets(partitions, OffsetSpec.latest(), timeout_s)

    def answering(self, call: Callable[[], T], what: str, timeout_s: float) -> T | None:
        """``call``'s answer, or None when the cluster does not answer within ``timeout_s`` (gone, or cut off). A
        cluster that answers and refuses us (a login, an ACL) is not one that is gone: that is a JobError naming
        the refusal, never None (a switch would go on as if the source were gone, skipping what needs it)."""
        try:
            self.metadata(timeout_s)  # a refused login is named here, at once
            return call()
        except ClusterUnreachable:
            return None
        except KafkaException as exc:
            if is_transient(exc):
                return None
            raise JobError(f"the {self.role} cluster at {self.bootstrap_servers} refused the {what}: "
                           f"{reason(exc)}") from None

    def stable_ends(self, partitions: Iterable[PartitionId], timeout_s: float = 30.0
                    ) -> dict[PartitionId, tuple[int, int]]:
        """Each partition's last stable offset and high watermark: below the first, what a read_committed reader
        reaches now; between them, the records of a transaction still open (unseen by every read_committed reader
        until it ends, and they may yet commit). The high watermark is read first, the stable offset after it: a
        record written between the two reads (a producer still writing) never passes for an open transaction."""
        pids = list(partitions)
        tps = [TopicPartition(p.topic, p.partition) for p in pids]

        def read(level: IsolationLevel) -> dict[TopicPartition, int]:
            return answers([self.admin.list_offsets({tp: OffsetSpec.latest() for tp in tps}, isolation_level=level,
                                                    request_timeout=timeout_s)], timeout_s)[0]

        def ends() -> dict[PartitionId, tuple[int, int]]:
            high = read(IsolationLevel.READ_UNCOMMITTED)
            stable = read(IsolationLevel.READ_COMMITTED)
            return {PartitionId(tp.topic, tp.partition): (min(stable[tp], high[tp]), high[tp]) for tp in tps}
        return self.answer(ends, _offsets_of(pids)) if pids else {}

    def open_transactions(self, partitions: Iterable[PartitionId], timeout_s: float = 30.0
                          ) -> dict[PartitionId, tuple[int, int]]:
        """The partitions where a transaction is open now, with their stable_ends."""
        return {p: (lso, hw) for p, (lso, hw) in self.stable_ends(partitions, timeout_s).items() if lso < hw}

    def offset_ranges(self, partitions: Iterable[PartitionId], timeout_s: float = 30.0
                      ) -> dict[PartitionId, tuple[int, int]]:
        """Each partition's log start and high watermark: the offsets a reader can start from now."""
        pids = list(partitions)
        return self.answer(lambda: watermarks(self.admin, pids, False, timeout_s), _offsets_of(pids)) if pids else {}

    def committed_ranges(self, partitions: Iterable[PartitionId], timeout_s: float = 30.0
                         ) -> dict[PartitionId, tuple[int, int]]:
        """Each partition's log start and last stable offset: the range a read_committed reader can read now."""
        pids = list(partitions)
        return self.answer(lambda: watermarks(self.admin, pids, True, timeout_s), _offsets_of(pids)) if pids else {}

    def _offsets(self, partitions: Iterable[PartitionId], spec: OffsetSpec, timeout_s: float) -> dict[PartitionId, int]:
        pids = list(partitions)
        request = {TopicPartition(p.topic, p.partition): spec for p in pids}
        if not request:
            return {}
        futures = self.admin.list_offsets(request, isolation_level=IsolationLevel.READ_COMMITTED,
                                          request_timeout=timeout_s)
        try:
            return {PartitionId(tp.topic, tp.partition): o for tp, o in answers([futures], timeout_s)[0].items()}
        except (KafkaException, TimeoutError) as failure:
            # The client keeps the leaders it knew for minutes (topic.metadata.refresh.interval.ms): a caller
            # that reads the ends after each stage would ask a dead leader, and wait out the timeout, at every
            # stage. A new client looks them up afresh on the next call.
            exc = as_kafka(failure, _offsets_of(pids))
            if is_transient(exc):
                self.renew_admin()
            if exc is failure:
                raise
            raise exc from failure

    def ensure_topic(self, topic: str, partitions: int, config: Mapping[str, str], what: str) -> None:
        """Create the topic when missing; give one that has fewer partitions than the source more (sink
        partition N receives source partition N)."""
        self.ensure_topics({topic: (partitions, config)}, what)

    def ensure_topics(self, wanted: Mapping[str, tuple[int, Mapping[str, str]]], what: str) -> None:
        """ensure_topic for many topics: one metadata request and one creation request for them all."""
        topics = self.metadata().topics
        missing = []
        for topic, (partitions, config) in wanted.items():
            t = topics.get(topic)
            if t is None or t.error is not None:
                missing.append(NewTopic(topic, partitions, replication_factor=-1, config=dict(config)))
            elif len(t.partitions) < partitions:
                self.grow_topic(topic, partitions, what)
        if not missing:
            return
        for topic, fut in self.admin.create_topics(missing).items():
            try:
                fut.result(30)
            except KafkaException as exc:
                if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:  # another job made it first
                    raise JobError(f"could not create {what} topic {topic!r}: {exc}") from exc
        if len(missing) == 1:
            log.info("created %s topic %s with %d partitions %s", what, missing[0].topic, missing[0].num_partitions,
                     missing[0].config)
        else:
            log.info("created %d %s topics: %s", len(missing), what, names_text([t.topic for t in missing]))

    def grow_topic(self, topic: str, partitions: int, what: str = "sink") -> None:
        """Give the topic ``partitions`` partitions in all, as a source that grew has."""
        fut = self.admin.create_partitions([NewPartitions(topic, partitions)])[topic]
        try:
            fut.result(30)
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.INVALID_PARTITIONS:  # another writer grew it first
                raise JobError(f"could not give {what} topic {topic!r} {partitions} partitions: {exc}") from exc
        log.info("%s topic %s now has %d partitions", what, topic, partitions)


def watermarks(admin: AdminClient, partitions: list[PartitionId], committed: bool, timeout_s: float
               ) -> dict[PartitionId, tuple[int, int]]:
    """Each partition's (log start, end), both requests at once, each one per leader however many topics the
    partitions span; ``committed``: the end is the last stable offset (what a read_committed reader reaches),
    else the high watermark."""
    tps = [TopicPartition(p.topic, p.partition) for p in partitions]
    level = IsolationLevel.READ_COMMITTED if committed else IsolationLevel.READ_UNCOMMITTED
    low, high = answers([admin.list_offsets({tp: spec for tp in tps}, isolation_level=level, request_timeout=timeout_s)
                         for spec in (OffsetSpec.earliest(), OffsetSpec.latest())], timeout_s)
    return {PartitionId(tp.topic, tp.partition): (low[tp], high[tp]) for tp in tps}


def _offsets_of(pids: list[PartitionId]) -> str:
    topics = sorted({p.topic for p in pids})
    return f"offsets of topic {topics[0]}" if len(topics) == 1 else f"offsets of {len(topics)} topics"


class ClusterUnreachable(JobError):
    """A cluster did not answer metadata in time; the message names the address."""


def wait_for_metadata(bootstrap_servers: str, timeout_s: float = 60.0, alive: Callable[[], bool] = lambda: True,
                      brokers: int = 1) -> None:
    """Block until a cluster that is starting answers a metadata request naming ``brokers`` brokers, or raise
    naming the address. ``alive`` is asked between tries: a broker process that exited is not waited for."""
    admin = AdminClient(client_settings({"bootstrap.servers": bootstrap_servers, "socket.timeout.ms": 2000}))
    deadline = time.monotonic() + timeout_s
    last: Exception | None = None
    while time.monotonic() < deadline:
        if not alive():
            raise ClusterUnreachable(f"the broker process for {bootstrap_servers} exited before it answered")
        try:
            if len(admin.list_topics(timeout=2).brokers) >= brokers:
                return
        except KafkaException as exc:  # while the port is not yet open
            last = exc
        time.sleep(0.2)
    raise ClusterUnreachable(f"no metadata from {bootstrap_servers} within {timeout_s:.0f}s: {last}")


def unique_topic_name(prefix: str = "kcompact") -> str:
    """Topic names that never collide across tests or runs sharing one broker."""
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def create_topic(bootstrap_servers: str, name: str, partitions: int = 1,
                 config: Mapping[str, str] | None = None, timeout_s: float = 30.0,
                 client_config: Mapping[str, str] | None = None, replication_factor: int = -1) -> str:
    """Create a topic (replication -1: the cluster's default) and wait until the broker confirms it; raise
    with the topic name on failure."""
    admin = AdminClient(client_settings({"bootstrap.servers": bootstrap_servers, **(client_config or {})}))
    futures = admin.create_topics(
        [NewTopic(name, num_partitions=partitions, replication_factor=replication_factor, config=dict(config or {}))],
        operation_timeout=timeout_s, request_timeout=timeout_s)
    try:
        futures[name].result(timeout=timeout_s)
    except KafkaException as exc:
        raise RuntimeError(f"could not create topic {name!r} on {bootstrap_servers}: {exc}") from exc
    return name
