"""Failback: the old primary is back, and the DR site has taken writes since the switch.

The diverged tail of a partition is what the old primary holds past the last mirrored offset of the switch's
report: records the DR site never received. They are counted and exported. For a compacted topic what
matters is each key's last value, so no truncation is needed: a key the DR site wrote since the switch gets
the DR site's value on the primary through the reverse mirror; a key that only the tail changed keeps the
tail's value (``keep``) or gets the DR site's value back, a tombstone where the DR site has none (``drop``).
Keys are matched within a partition, as compaction matches them.
"""

from __future__ import annotations

import base64
import json
import time
from dataclasses import asdict, dataclass, field, replace
from enum import Enum
from typing import Callable, Mapping

from streaming.cleaner.config import CompactionConfig, Strategy
from streaming.cleaner.strategy import NO_VERSION, VERSION_BYTES, header_version
from streaming.disaster.report import SwitchReport
from streaming.kafka.clients import RecordProducer, TopicRecord
from streaming.kafka.groups.group_positions import MovedBack
from streaming.kafka.headers.offset_header import OFFSET_HEADER, source_offset
from streaming.kafka.headers.origin_header import ORIGIN_HEADER
from streaming.kafka.source.source_tail import TailFigures, read_tails
from streaming.log.storage import read_json, write_json
from streaming.partition_id import PartitionId
from streaming.state.layout import failback_file
from streaming.state.stores import StateDir

DIVERGED_OFFSET_HEADER = "kcompact.diverged.offset"  # an exported record's offset on the old primary
READ_TIMEOUT_S = 600.0
MIRROR_HEADERS = (OFFSET_HEADER, ORIGIN_HEADER)  # the forward mirror's: a value given back is the DR site's own
NAMED_KEYS = 20  # keys named per partition in the text report; --json names every one


class Diverged(str, Enum):
    DROP = "drop"
    KEEP = "keep"


@dataclass
class TailPartition:
    """One partition's diverged tail and what failback did with its keys."""

    topic: str
    partition: int
    first_offset: int                 # the first offset past the last mirrored
    end_offset: int                   # the old primary's end when failback read it
    records: int = 0
    tail_only_keys: list[str] = field(default_factory=list)  # keys whose latest value exists only in the tail
    written_at_dr: int = 0            # of those, keys the DR site wrote since the switch: its value goes back
    restored: int = 0                 # keys given the DR site's value back (drop)
    tombstoned: int = 0               # keys the DR site never had, deleted (drop)
    kept: int = 0                     # keys left with the tail's value (keep)

    def to_doc(self) -> dict:
        return asdict(self)

    @classmethod
    def from_doc(cls, doc: Mapping) -> "TailPartition":
        return cls(**doc)


@dataclass(frozen=True)
class Export:
    """Where the diverged tail goes: a topic at the DR site by template, or a file of JSON lines."""

    topic_template: str | None = None
    path: str | None = None

    def describe(self) -> str:
        return f"topic {self.topic_template!r} at the DR site" if self.topic_template else f"file {self.path}"


def key_text(key: bytes | None) -> str:
    if key is None:
        return "(no key)"
    try:
        return key.decode("utf-8")
    except UnicodeDecodeError:
        return "base64:" + base64.b64encode(key).decode()


def _b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode()


def _export_line(pid: PartitionId, record: TopicRecord) -> str:
    return json.dumps({"topic": pid.topic, "partition": pid.partition, "offset": record.offset,
                       "timestamp_ms": record.timestamp_ms, "key": _b64(record.key), "value": _b64(record.value),
                       "headers": [[k, _b64(v)] for k, v in record.headers]})


@dataclass
class TailReader:
    """Reads the old primary's diverged tails, exporting each record as it passes, and keeps each key's
    latest record there."""

    primary_settings: Mapping[str, str]
    export: Export
    dr_producer: Callable[[], RecordProducer]  # for an export topic at the DR site
    figures: dict[PartitionId, TailFigures] = field(default_factory=dict)  # what the read counted

    def read(self, ranges: Mapping[PartitionId, tuple[int, int]]) -> dict[PartitionId, dict[bytes | None, TopicRecord]]:
        latest: dict[PartitionId, dict[bytes | None, TopicRecord]] = {p: {} for p in ranges}
        producer = self.dr_producer() if self.export.topic_template else None
        out = open(self.export.path, "w", encoding="utf-8") if self.export.path else None  # noqa: SIM115
        try:
            def each(pid: PartitionId, record: TopicRecord) -> None:
                latest[pid][record.key] = record
                if producer is not None:
                    headers = (*record.headers, (DIVERGED_OFFSET_HEADER, b"%d" % record.offset))
                    producer.send(self.export.topic_template.format(topic=pid.topic),
                                  TopicRecord(record.key, record.value, headers, record.offset, record.timestamp_ms),
                                  pid.partition, keep_time=True)
                if out is not None:
                    out.write(_export_line(pid, record) + "\n")
            self.figures = read_tails(self.primary_settings, ranges, READ_TIMEOUT_S, each)
            if producer is not None:
                producer.flush(120.0)
        finally:
            if out is not None:
                out.close()
        return latest


def dr_latest(dr_settings: Mapping[str, str], ranges: Mapping[PartitionId, tuple[int, int]],
              wanted: Mapping[PartitionId, set[bytes | None]]) -> dict[PartitionId, dict[bytes | None, TopicRecord]]:
    """The DR site's latest record of each wanted key, by DR partition (absent: the DR site has none)."""
    found: dict[PartitionId, dict[bytes | None, TopicRecord]] = {p: {} for p in ranges}

    def each(pid: PartitionId, record: TopicRecord) -> None:
        if record.key in wanted.get(pid, ()):
            found[pid][record.key] = record
    read_tails(dr_settings, ranges, READ_TIMEOUT_S, each)
    return found


def mirrored(record: TopicRecord) -> bool:
    """A DR record the forward mirror wrote (it names its source offset), not one written at the DR site."""
    return source_offset(record.headers) is not None


def _version(record: TopicRecord, config: CompactionConfig) -> int | None:
    """The record's version under a version strategy (None: the offset strategy, or no usable version)."""
    if config.compaction_strategy is Strategy.TIMESTAMP:
        return record.timestamp_ms if record.timestamp_ms >= 0 else None
    if config.compaction_strategy is Strategy.HEADER:
        version, usable = header_version([{"key": k, "value": v} for k, v in record.headers],
                                         config.compaction_strategy_header or "")
        return version if usable and version != NO_VERSION else None
    return None


def outranking(record: TopicRecord, beaten: TopicRecord, config: CompactionConfig | None) -> TopicRecord:
    """``record``, written after ``beaten`` on the same partition, ranked at least as high under the topic's
    strategy, so it wins the key (equal versions go to the higher offset): the DR record's own older timestamp
    or version would lose to the tail's newer one in any later compaction of the old primary (a forward mirror
    started again), which would carry the tail's value to the DR site after all."""
    if config is None:
        return record
    beaten_version, own = _version(beaten, config), _version(record, config)
    if beaten_version is None or (own is not None and own >= beaten_version):
        return record
    if config.compaction_strategy is Strategy.TIMESTAMP:
        return replace(record, timestamp_ms=beaten_version)
    version = (config.compaction_strategy_header or "", beaten_version.to_bytes(VERSION_BYTES, "big", signed=True))
    return replace(record, headers=(*record.headers, version))  # the last occurrence is the one read


def settle(tails: dict[PartitionId, TailPartition], latest: Mapping[PartitionId, Mapping[bytes | None, TopicRecord]],
           at_dr: Mapping[PartitionId, Mapping[bytes | None, TopicRecord]], sink_of: Mapping[PartitionId, PartitionId],
           policy: Diverged, dr_cluster_id: str, restore: Callable[[PartitionId, TopicRecord], None],
           compaction: Mapping[str, CompactionConfig] | None = None) -> None:
    """Each tail key by the policy; ``restore`` writes a record to the old primary's partition. The records
    written carry the DR site as their origin: a forward mirror started again later leaves them out.
    ``compaction``: each source topic's, so that what is written outranks the tail's record of its key."""
    origin = (ORIGIN_HEADER, dr_cluster_id.encode())
    now_ms = int(time.time() * 1000)  # a tombstone's own time, as the producer would stamp it
    for pid, keys in latest.items():
        tail = tails[pid]
        dr = at_dr.get(sink_of[pid], {})
        config = None if compaction is None else compaction.get(pid.topic)
        for key in sorted(k for k in keys if k is not None):  # a keyless record is exported, never settled
            tail.tail_only_keys.append(key_text(key))
            there = dr.get(key)
            if there is not None and not mirrored(there):
                tail.written_at_dr += 1  # the reverse mirror brings the DR site's value
            elif policy is Diverged.KEEP:
                tail.kept += 1
            elif there is None:
                tail.tombstoned += 1
                restore(pid, outranking(TopicRecord(key, None, (origin,), -1, now_ms), keys[key], config))
            else:
                tail.restored += 1
                headers = tuple(h for h in there.headers if h[0] not in MIRROR_HEADERS) + (origin,)
                restore(pid, outranking(TopicRecord(key, there.value, headers, -1, there.timestamp_ms), keys[key],
                                        config))


@dataclass(frozen=True)
class FailbackReport:
    at_ms: int
    policy: Diverged
    export: str
    switch: SwitchReport
    partitions: tuple[TailPartition, ...]
    unfenced_topics: tuple[str, ...] = ()
    groups_moved: tuple[MovedBack, ...] = ()
    reverse_state_dir: str = ""
    dry_run: bool = False

    @property
    def records(self) -> int:
        return sum(p.records for p in self.partitions)

    def summary(self) -> str:
        keys = sum(len(p.tail_only_keys) for p in self.partitions)
        verb = "failback would" if self.dry_run else "failback"
        return (f"{verb} ({self.policy.value} the diverged tail): {self.records:,} records in the old primary's "
                f"diverged tail, exported to {self.export}; {keys:,} keys whose latest value is only there: "
                f"{sum(p.written_at_dr for p in self.partitions):,} written at the DR site since, "
                f"{sum(p.restored for p in self.partitions):,} given the DR site's value, "
                f"{sum(p.tombstoned for p in self.partitions):,} deleted, {sum(p.kept for p in self.partitions):,} "
                f"kept; {len(self.groups_moved)} group offsets moved back")

    def render(self) -> str:
        lines = [self.summary()]
        if self.unfenced_topics:
            lines.append(f"  the promote's DENY WRITE ACLs removed from {len(self.unfenced_topics)} topic(s)")
        for p in self.partitions:
            if p.records:
                named = ", ".join(p.tail_only_keys[:NAMED_KEYS]) + (" ..." if len(p.tail_only_keys) > NAMED_KEYS else "")
                lines.append(f"  {p.topic}-{p.partition}: {p.records} records at offsets [{p.first_offset}, "
                             f"{p.end_offset}); keys only there: {named}")
        for g in self.groups_moved:
            lines.append(f"  group {g.group}: {g.topic}-{g.partition} DR offset {g.dr_offset} -> offset {g.offset} "
                         f"({g.change})")
        return "\n".join(lines)

    def to_doc(self) -> dict:
        return {"at_ms": self.at_ms, "policy": self.policy.value, "export": self.export, "summary": self.summary(),
                "records": self.records, "partitions": [p.to_doc() for p in self.partitions],
                "unfenced_topics": list(self.unfenced_topics), "groups_moved": [g.to_doc() for g in self.groups_moved],
                "reverse_state_dir": self.reverse_state_dir, "dry_run": self.dry_run,
                "switch_at_ms": self.switch.at_ms}


@dataclass(frozen=True)
class Prepared:
    """A failback's record in its reverse state dir: the ranges of the diverged tail it read (kept first, so a
    failback stopped half-way reads the same ones again, not the records it wrote since), then the tail it
    settled, and its report. A second failback reads and writes the tail no more (safe to run twice)."""

    ranges: Mapping[PartitionId, tuple[int, int]]
    settled: list[TailPartition] | None
    report: dict | None

    def to_doc(self) -> dict:
        return {"ranges": [[p.topic, p.partition, start, end] for p, (start, end) in sorted(self.ranges.items())],
                "partitions": None if self.settled is None else [p.to_doc() for p in self.settled],
                "report": self.report}

    @classmethod
    def from_doc(cls, doc: Mapping) -> "Prepared":
        partitions = doc.get("partitions")
        return cls({PartitionId(t, p): (start, end) for t, p, start, end in doc.get("ranges", [])},
                   None if partitions is None else [TailPartition.from_doc(d) for d in partitions], doc.get("report"))


def read_prepared(reverse: StateDir) -> Prepared | None:
    doc = read_json(reverse.storage, failback_file(reverse))
    return None if doc is None else Prepared.from_doc(doc)


def write_prepared(reverse: StateDir, prepared: Prepared) -> None:
    write_json(reverse.storage, failback_file(reverse), prepared.to_doc(), indent=2)


