"""Consumer groups follow the mirror: a group's committed offsets on the source, translated to the sink and
committed there for the same group, so its consumers can move to the sink cluster.

MirrorMaker 2 does this from sampled offset-syncs, so its translation is approximate and a consumer re-reads
after a failover. Here every sink record names its source offset (kcompact.offset), so the translation is
exact (streaming.kafka.source.first_records): the sink offset of the first record at or past the committed source
offset, or the sink's end when the sink has not emitted that far (the consumer may re-read there, never
skip). MirrorMaker 2's rules are kept: a group active on the sink is never overwritten, and a sink offset
never moves back unless a rewind is allowed.
"""

from __future__ import annotations

import logging
import re
import time
from dataclasses import dataclass
from enum import Enum
from typing import Mapping, Sequence

from confluent_kafka import ConsumerGroupTopicPartitions, KafkaError, KafkaException, TopicPartition

from streaming.errors import JobError
from streaming.kafka.admin import Cluster
from streaming.kafka.clients import committed_offsets
from streaming.kafka.failures import TRY_S, reason, retrying
from streaming.kafka.source.first_records import translate_all
from streaming.runtime.moments import Moment, reached
from streaming.partition_id import PartitionId

log = logging.getLogger(__name__)


class GroupSyncError(JobError):
    """A group's offsets could not be read or committed; the message names the group and the cluster."""


@dataclass(frozen=True)
class MirroredTopic:
    source: str
    sink: str
    partitions: int


class Change(Enum):
    COMMIT = "commit"               # the sink offset moves forward (or is set for the first time)
    REWIND = "rewind"               # it moves back: only with allow_rewind
    UP_TO_DATE = "up to date"
    KEPT_AHEAD = "kept: the sink is ahead"  # it would move back without allow_rewind
    ACTIVE = "skipped: active on the sink"


@dataclass(frozen=True)
class OffsetSync:
    """One group's partition: where it is on the source, where that is on the sink, and what a round does."""

    group: str
    topic: str
    partition: int
    source_committed: int
    sink_topic: str
    sink_offset: int
    sink_committed: int | None
    change: Change

    @property
    def moves(self) -> bool:
        return self.change in (Change.COMMIT, Change.REWIND)

    def to_doc(self) -> dict:
        return {"group": self.group, "topic": self.topic, "partition": self.partition,
                "source_committed": self.source_committed, "sink_topic": self.sink_topic,
                "sink_offset": self.sink_offset, "sink_committed": self.sink_committed, "change": self.change.value}


@dataclass(frozen=True)
class SyncRound:
    at_ms: int
    rows: list[OffsetSync]

    @property
    def groups_synced(self) -> list[str]:
        """Groups whose sink offsets now follow the source (moved or already there)."""
        return sorted({r.group for r in self.rows} - set(self.groups_active))

    @property
    def groups_active(self) -> list[str]:
        return sorted({r.group for r in self.rows if r.change is Change.ACTIVE})

    @property
    def offsets_moved(self) -> int:
        return sum(1 for r in self.rows if r.moves)


@dataclass
class GroupSyncTotals:
    """What the metrics and status show: the last round and the offsets committed since the job started."""

    rounds: int = 0
    last_ms: int | None = None
    groups_synced: int = 0
    groups_active: int = 0
    offsets_committed: int = 0

    def add(self, round_: SyncRound) -> None:
        self.rounds += 1
        self.last_ms = round_.at_ms
        self.groups_synced = len(round_.groups_synced)
        self.groups_active = len(round_.groups_active)
        self.offsets_committed += round_.offsets_moved

    def to_doc(self) -> dict:
        return {"rounds": self.rounds, "last-sync-ms": self.last_ms, "groups-synced": self.groups_synced,
                "groups-skipped-active": self.groups_active, "offsets-committed": self.offsets_committed}


class GroupOffsetSync:
    """One round reads the source's groups that ``pattern`` matches whole, translates their committed offsets
    on the mirrored topics, and commits them for the same groups on the sink. The reads and the commits use
    admin requests only: no client of ours joins a consumer group."""

    def __init__(self, source: Cluster, sink: Cluster, pattern: re.Pattern[str], allow_rewind: bool = False) -> None:
        self.source, self.sink = source, sink
        self.pattern = pattern
        self.allow_rewind = allow_rewind
        self._said_active: set[str] = set()

    def sync(self, topics: Sequence[MirroredTopic], dry_run: bool = False) -> SyncRound:
        """One round over the mirrored ``topics`` (they grow with a pattern subscription): what it found, and
        (unless ``dry_run``) committed."""
        planned = self.plan(topics)
        if dry_run:
            return planned
        for group in sorted({r.group for r in planned.rows if r.moves}):
            self._commit(group, [r for r in planned.rows if r.group == group and r.moves])
        for group in planned.groups_active:
            if group not in self._said_active:
                log.warning("consumer group %s is active on the sink cluster %s: its offsets there are left as "
                            "they are while it has members", group, self.sink.bootstrap_servers)
        self._said_active = set(planned.groups_active)
        return planned

    def plan(self, topics: Sequence[MirroredTopic]) -> SyncRound:
        """Every group's commits first, then their translations together (translate_all): a round over
        thousands of partitions costs a few fetches a step of the search, not a reader a partition."""
        by_source = {t.source: t for t in topics}
        now_ms = int(time.time() * 1000)
        found = []
        for group in self.groups():
            committed = self._source_committed(group, by_source)
            if not committed:
                continue
            sinks = {s: PartitionId(by_source[s.topic].sink, s.partition) for s in committed}
            found.append((group, committed, sinks, self._active_on_sink(group),
                          self._sink_committed(group, set(sinks.values()))))
        wanted = {(sinks[s], offset) for _, committed, sinks, _, _ in found for s, offset in committed.items()}
        positions = translate_all(self.sink, wanted, "the sink's records where the groups stand")
        rows: list[OffsetSync] = []
        for group, committed, sinks, active, on_sink in found:
            for source, offset in sorted(committed.items()):
                sink = sinks[source]
                target = positions[(sink, offset)].sink_offset
                current = on_sink.get(sink)
                rows.append(OffsetSync(group, source.topic, source.partition, offset, sink.topic, target, current,
                                       self._change(active, target, current)))
        return SyncRound(now_ms, rows)

    def _change(self, active: bool, target: int, current: int | None) -> Change:
        if active:
            return Change.ACTIVE
        if current is None or target > current:
            return Change.COMMIT
        if target == current:
            return Change.UP_TO_DATE
        return Change.REWIND if self.allow_rewind else Change.KEPT_AHEAD

    # ----- admin requests -------------------------------------------------------------------------------

    def groups(self) -> list[str]:
        """The source groups the pattern matches, of those the principal may describe."""
        try:
            listed = self.source.answer(
                lambda: self.source.admin.list_consumer_groups(request_timeout=TRY_S).result(TRY_S),
                "the list of consumer groups", quiet=True)
        except KafkaException as exc:
            raise GroupSyncError(f"cannot list the consumer groups of the source cluster {self.source.bootstrap_servers}: "
                                 f"{reason(exc)}") from exc
        return sorted(g.group_id for g in listed.valid if self.pattern.fullmatch(g.group_id))

    def _source_committed(self, group: str, topics: Mapping[str, MirroredTopic]) -> dict[PartitionId, int]:
        """The group's committed offsets on the mirrored topics (those it never committed are absent)."""
        found = self._offsets(self.source, group, [TopicPartition(t, p) for t, m in topics.items()
                                                   for p in range(m.partitions)])
        return {PartitionId(tp.topic, tp.partition): tp.offset for tp in found if tp.offset >= 0}

    def _sink_committed(self, group: str, partitions: set[PartitionId]) -> dict[PartitionId, int]:
        found = self._offsets(self.sink, group, [TopicPartition(p.topic, p.partition)
                                                 for p in sorted(partitions)])
        return {PartitionId(tp.topic, tp.partition): tp.offset for tp in found if tp.offset >= 0}

    def _offsets(self, cluster: Cluster, group: str, partitions: list[TopicPartition]) -> list[TopicPartition]:
        try:
            return retrying(lambda: committed_offsets(cluster.settings_with_bootstrap, group, partitions, TRY_S),
                            f"the offsets of consumer group {group}", cluster.connect_timeout_s, side=cluster.role,
                            level=logging.DEBUG)
        except KafkaException as exc:
            raise GroupSyncError(f"cannot read the offsets of consumer group {group} on the {cluster.role} cluster "
                                 f"{cluster.bootstrap_servers}: {reason(exc)}") from exc

    def _active_on_sink(self, group: str) -> bool:
        return has_members(self.sink, group)

    def _commit(self, group: str, rows: list[OffsetSync]) -> None:
        commit_group(self.sink, group, {PartitionId(r.sink_topic, r.partition): r.sink_offset for r in rows})
        for r in rows:
            log.info("consumer group %s: %s-%d committed offset %d -> %s-%d offset %d (was %s)", group, r.topic,
                     r.partition, r.source_committed, r.sink_topic, r.partition, r.sink_offset,
                     "none" if r.sink_committed is None else r.sink_committed)


def has_members(cluster: Cluster, group: str) -> bool:
    """The group is active on ``cluster``: its offsets there are its members' own, never overwritten."""
    try:
        described = cluster.answer(
            lambda: cluster.admin.describe_consumer_groups([group], request_timeout=TRY_S)[group].result(TRY_S),
            f"the members of consumer group {group}", quiet=True)
    except KafkaException as exc:
        if exc.args[0].code() == KafkaError.GROUP_ID_NOT_FOUND:  # never seen there: nobody is in it
            return False
        raise GroupSyncError(f"cannot describe consumer group {group} on the {cluster.role} cluster "
                             f"{cluster.bootstrap_servers}: {reason(exc)}") from exc
    return bool(described.members)


def commit_group(cluster: Cluster, group: str, offsets: Mapping[PartitionId, int]) -> None:
    """The group's offsets committed on ``cluster`` through the admin API: no client of ours joins it."""
    request = ConsumerGroupTopicPartitions(group, [TopicPartition(p.topic, p.partition, o)
                                                   for p, o in sorted(offsets.items())])
    cannot = f"cannot commit the offsets of consumer group {group} on the {cluster.role} cluster {cluster.bootstrap_servers}"
    reached(Moment.GROUP_SYNC_COMMIT, group)

    def commit() -> list[TopicPartition]:
        result = cluster.admin.alter_consumer_group_offsets([request], request_timeout=TRY_S)[group].result(TRY_S)
        failed = [tp for tp in result.topic_partitions if tp.error is not None]
        if failed:  # per partition: a fresh cluster's coordinator still loading answers so, and is asked again
            raise KafkaException(failed[0].error)
        return result.topic_partitions

    try:
        cluster.answer(commit, f"the commit of consumer group {group}'s offsets", quiet=True)
    except KafkaException as exc:
        raise GroupSyncError(f"{cannot}: {reason(exc)}") from exc
