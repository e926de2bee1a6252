"""Where consumer groups stand at the DR site after a switch, and what source offset each position stands
for: the source offset the sink record there carries (every sink record names its own), or, at the sink's
end, the one after the last mirrored. Read with the same clients as the group sync: admin listing, and a
consumer of each group that never joins it; the records where they stand, for all of them together."""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import Iterable, Mapping

from confluent_kafka import KafkaException, TopicPartition

from streaming.kafka.admin import Cluster
from streaming.kafka.clients import committed_offsets
from streaming.kafka.failures import TRY_S, reason, retrying
from streaming.kafka.source.first_records import first_at_or_after_all, translate_all
from streaming.kafka.groups.group_sync import GroupSyncError, commit_group, has_members
from streaming.partition_id import PartitionId


@dataclass(frozen=True)
class HeldOffset:
    group: str
    sink: PartitionId
    offset: int                # the group's committed offset on the sink
    source_offset: int | None  # the source offset of the record there; None at the sink's end


def held_offsets(cluster: Cluster, pattern: re.Pattern[str], partitions: Iterable[PartitionId]) -> list[HeldOffset]:
    """Every group the pattern matches whole with a commit on one of ``partitions`` of ``cluster``."""
    wanted = sorted(partitions)
    try:
        listed = cluster.answer(lambda: cluster.admin.list_consumer_groups(request_timeout=TRY_S).result(TRY_S),
                                "the list of consumer groups", quiet=True)
    except KafkaException as exc:
        raise GroupSyncError(f"cannot list the consumer groups of the {cluster.role} cluster "
                             f"{cluster.bootstrap_servers}: {reason(exc)}") from exc
    commits = [(group, pid, offset) for group in sorted(g.group_id for g in listed.valid if pattern.fullmatch(g.group_id))
               for pid, offset in group_commits(cluster, group, wanted).items()]
    if not commits:
        return []
    found = first_at_or_after_all(cluster, [(pid, o) for _, pid, o in commits],
                                  "the records where the groups stand")
    there = {k: None if v is None else v.source_offset for k, v in found.items()}
    return [HeldOffset(group, pid, offset, there[(pid, offset)]) for group, pid, offset in commits]


def group_commits(cluster: Cluster, group: str, partitions: Iterable[PartitionId]) -> dict[PartitionId, int]:
    """The group's committed offsets on ``partitions`` (those it never committed are absent)."""
    wanted = [TopicPartition(p.topic, p.partition) for p in partitions]
    try:
        found = retrying(lambda: committed_offsets(cluster.settings_with_bootstrap, group, wanted, TRY_S),
                         f"the offsets of consumer group {group}", cluster.connect_timeout_s, side=cluster.role,
                         level=logging.DEBUG)
    except KafkaException as exc:
        raise GroupSyncError(f"cannot read the offsets of consumer group {group} on the {cluster.role} cluster "
                             f"{cluster.bootstrap_servers}: {reason(exc)}") from exc
    return {PartitionId(tp.topic, tp.partition): tp.offset for tp in found if tp.offset >= 0}


@dataclass(frozen=True)
class MovedBack:
    """One group's partition moved from the DR site back to the old primary."""

    group: str
    topic: str       # on the old primary
    partition: int
    dr_offset: int
    offset: int      # on the old primary
    change: str

    def to_doc(self) -> dict:
        return {"group": self.group, "topic": self.topic, "partition": self.partition, "dr_offset": self.dr_offset,
                "offset": self.offset, "change": self.change}


def move_back(dr: Cluster, primary: Cluster, pattern: re.Pattern[str], primary_topic_of: Mapping[str, str],
              partitions: Iterable[PartitionId], dry_run: bool = False) -> list[MovedBack]:
    """Each group's DR offsets, translated exactly to the old primary: a position among the records the forward
    mirror wrote stands for the source offset that record names (the very record on the primary); a position
    among the DR site's own records, for the first record the reverse mirror wrote from there on (or the
    primary's end). A group with members on the primary is left alone, and an offset there never moves back
    (a second failback after its consumers moved on)."""
    moved: list[MovedBack] = []
    held = held_offsets(dr, pattern, partitions)
    targets = {h: PartitionId(primary_topic_of[h.sink.topic], h.sink.partition) for h in held}
    among_dr_writes = [(targets[h], h.offset) for h in held if h.source_offset is None]
    translated = translate_all(primary, among_dr_writes, "the primary's records where the groups go back to")
    by_group: dict[str, dict[PartitionId, tuple[int, int]]] = {}
    for h in held:
        target = targets[h]
        offset = translated[(target, h.offset)].sink_offset if h.source_offset is None else h.source_offset
        by_group.setdefault(h.group, {})[target] = (h.offset, offset)
    for group, offsets in sorted(by_group.items()):
        active = has_members(primary, group)
        current = {} if active else group_commits(primary, group, offsets)
        forward = {p: o for p, (_, o) in offsets.items() if not active and (p not in current or o > current[p])}
        if forward and not dry_run:
            commit_group(primary, group, forward)
        for p, (dr_offset, o) in sorted(offsets.items()):
            change = ("skipped: active on the primary" if active else
                      ("would commit" if dry_run else "committed") if p in forward else
                      "up to date" if current.get(p) == o else "kept: the primary is ahead")
            moved.append(MovedBack(group, p.topic, p.partition, dr_offset, o, change))
    return moved
