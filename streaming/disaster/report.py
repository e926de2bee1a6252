"""The report of a switch to the DR site (promote or failover): per partition, how far the mirror got and
what it did not carry (the RPO), and per group, where the DR site's offsets stand on the source.

Every sink record names its source offset, so ``last_mirrored_offset`` is read, never estimated: the RPO is
the source's records past it. Plain data: the commands fill it from the clusters and the state dir.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import Enum
from typing import Mapping

from streaming.utc import utc_or_dash

NONE_MIRRORED = -1  # last_mirrored_offset of a partition the sink holds nothing of


class Switch(str, Enum):
    PROMOTE = "promoted"
    FAILOVER = "failed over"


class EndKnown(str, Enum):
    """Where a source partition's end offset comes from."""

    LIVE = "live"              # asked of the source by this command
    LAST_KNOWN = "last known"  # the job's own records: its last trigger's end, or its log's end


@dataclass(frozen=True)
class PartitionRpo:
    topic: str
    partition: int
    sink_topic: str
    last_mirrored_offset: int            # the source offset of the sink's last committed record (-1: none)
    last_mirrored_timestamp_ms: int | None
    source_end_offset: int | None        # None: neither the source nor the job's records know it
    source_end: EndKnown
    source_end_at_ms: int | None         # when that end was seen
    rpo_records: int | None              # source records past last_mirrored_offset
    rpo_ms: int | None                   # from the last mirrored record's time (or, with none, the oldest
                                         # unmirrored one's) to the newest unmirrored one's
    counted: str = "read"                # "read": the records were read and counted; "offsets": counted by offset
    first_unmirrored_offset: int = 0     # where the RPO's records begin (past what emission left out)
    open_records: int = 0                # past source_end_offset: offsets held by a transaction still open when
                                         # the report read the end (at most that many records); not mirrored,
                                         # and they may yet commit

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"

    def to_doc(self) -> dict:
        return {**asdict(self), "source_end": self.source_end.value}

    @classmethod
    def from_doc(cls, doc: Mapping) -> "PartitionRpo":
        first = doc.get("first_unmirrored_offset", doc["last_mirrored_offset"] + 1)
        return cls(**{**doc, "source_end": EndKnown(doc["source_end"]), "first_unmirrored_offset": first})


@dataclass(frozen=True)
class GroupPosition:
    """One group's partition as the DR site holds it after the switch."""

    group: str
    topic: str
    partition: int
    sink_topic: str
    sink_offset: int                     # the group's committed offset at the DR site
    stands_for: int                      # the source offset a consumer resuming there resumes at
    source_committed: int | None         # the group's last commit on the source (None: not known)
    unseen_records: int | None           # source records from where it stood that the DR site does not hold
    consumed_unmirrored: int             # records it consumed on the source that the DR site does not hold

    def to_doc(self) -> dict:
        return asdict(self)

    @classmethod
    def from_doc(cls, doc: Mapping) -> "GroupPosition":
        return cls(**doc)


@dataclass(frozen=True)
class SwitchReport:
    switch: Switch
    at_ms: int
    dry_run: bool
    source_answered: bool
    partitions: tuple[PartitionRpo, ...]
    groups: tuple[GroupPosition, ...] = ()
    fenced_topics: tuple[str, ...] = ()  # DENY WRITE ACLs added on the source (--fence-source-writes)
    groups_synced: bool = False          # a last group offset sync ran (the source answered)
    notes: tuple[str, ...] = field(default=())

    @property
    def rpo_records(self) -> int | None:
        """Every partition's, summed; None when some partition's end is unknown."""
        counts = [p.rpo_records for p in self.partitions]
        return None if any(c is None for c in counts) else sum(counts)

    @property
    def rpo_ms(self) -> int | None:
        times = [p.rpo_ms for p in self.partitions if p.rpo_ms is not None]
        return max(times) if times else None

    @property
    def open_records(self) -> int:
        return sum(p.open_records for p in self.partitions)

    @property
    def behind(self) -> list[PartitionRpo]:
        return [p for p in self.partitions if p.rpo_records != 0 or p.open_records]

    def summary(self) -> str:
        """One line, first: a whole cluster's report is read from the top."""
        verb = f"would be {self.switch.value} (dry run)" if self.dry_run else self.switch.value
        records = "unknown" if self.rpo_records is None else f"{self.rpo_records:,}"
        longest = "-" if self.rpo_ms is None else f"{self.rpo_ms / 1000:.1f}s"
        ends = "the source answered" if self.source_answered else "the source did not answer: ends last known"
        unseen = sum(g.unseen_records or 0 for g in self.groups)
        return (f"{verb} at {utc_or_dash(self.at_ms)} UTC: {len(self.partitions)} partitions, "
                f"{len(self.partitions) - len(self.behind)} fully mirrored; RPO {records} records, {longest}"
                + (f", {self.open_records:,} more in transactions still open" if self.open_records else "")
                + f"; {ends}; {len({g.group for g in self.groups})} group(s)"
                + (f", {unseen:,} records they will not see" if unseen else ""))

    def render(self, shown: int = 50) -> str:
        lines = [self.summary()]
        lines += [f"  {note}" for note in self.notes]
        if self.fenced_topics:
            lines.append(f"  source writes fenced: DENY WRITE for every principal on {len(self.fenced_topics)} topic(s)")
        behind = self.behind
        if behind:
            lines.append(f"{'partition':32} {'last mirrored':>14} {'source end':>11} {'end is':>10} "
                         f"{'RPO records':>12} {'RPO s':>8}")
            for p in behind[:shown]:
                lines.append(f"{p.name:32} {p.last_mirrored_offset:>14} {_dash(p.source_end_offset):>11} "
                             f"{p.source_end.value:>10} {_dash(p.rpo_records):>12} "
                             f"{'-' if p.rpo_ms is None else f'{p.rpo_ms / 1000:.1f}':>8}")
            if len(behind) > shown:
                lines.append(f"({len(behind) - shown} more partitions behind: --json lists every one)")
        if self.groups:
            lines.append(f"{'group':24} {'partition':32} {'DR offset':>10} {'stands for':>11} {'source commit':>14} "
                         f"{'unseen':>8}")
            for g in self.groups[:shown]:
                lines.append(f"{g.group:24} {f'{g.topic}-{g.partition}':32} {g.sink_offset:>10} {g.stands_for:>11} "
                             f"{_dash(g.source_committed):>14} {_dash(g.unseen_records):>8}")
            if len(self.groups) > shown:
                lines.append(f"({len(self.groups) - shown} more group partitions: --json lists every one)")
        return "\n".join(lines)

    def to_doc(self) -> dict:
        return {"switch": self.switch.value, "at_ms": self.at_ms, "dry_run": self.dry_run,
                "source_answered": self.source_answered, "summary": self.summary(),
                "rpo_records": self.rpo_records, "rpo_ms": self.rpo_ms, "open_records": self.open_records,
                "partitions": [p.to_doc() for p in self.partitions], "groups": [g.to_doc() for g in self.groups],
                "fenced_topics": list(self.fenced_topics), "groups_synced": self.groups_synced,
                "notes": list(self.notes)}

    @classmethod
    def from_doc(cls, doc: Mapping) -> "SwitchReport":
        return cls(Switch(doc["switch"]), doc["at_ms"], doc["dry_run"], doc["source_answered"],
                   tuple(PartitionRpo.from_doc(p) for p in doc["partitions"]),
                   tuple(GroupPosition.from_doc(g) for g in doc["groups"]), tuple(doc.get("fenced_topics", ())),
                   doc.get("groups_synced", False), tuple(doc.get("notes", ())))


def _dash(value: int | None) -> str:
    return "-" if value is None else str(value)
