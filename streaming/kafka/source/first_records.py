"""Offset translation for consumers moving from a source topic to its compacted sink (MirrorMaker 2's
checkpoints, done from the sink itself): every sink record names its source offset, and sink records are in
source-offset order, so the first sink record at or past a source offset is found by binary search.

Every caller translates many partitions at once (a group sync, a switch's report, failback's move-back, the
erase audit's lost notes): the searches run in step, each step reading every search's middle record together,
so thousands of partitions cost one consumer and a few fetches a step, where a reader a partition would cost a
connection and a round trip each."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

from confluent_kafka import Consumer

from streaming.kafka.admin import Cluster
from streaming.kafka.headers.offset_header import source_offset
from streaming.kafka.source.range_read import range_reader, read_ranges
from streaming.partition_id import PartitionId


@dataclass(frozen=True)
class SinkPosition:
    sink_offset: int            # where the consumer resumes on the sink
    source_offset: int | None   # the source offset of the record there; None at the sink's end


def translate_all(cluster: Cluster, wanted: Iterable[tuple[PartitionId, int]], what: str
                  ) -> dict[tuple[PartitionId, int], SinkPosition]:
    """For each (sink partition of ``cluster``, source offset): the position of the first record whose source
    offset is at or past it; the partition's end when there is none (everything up to there is emitted: the
    consumer resumes at the end). ``what``: the read, as a failure names it; a read that stops for the
    cluster's connect timeout fails."""
    wanted = set(wanted)
    if not wanted:
        return {}
    ranges = cluster.committed_ranges({p for p, _ in wanted})
    with contextlib.closing(range_reader(cluster.settings_with_bootstrap, "positions")) as consumer:
        return _translate(consumer, wanted, ranges, cluster.connect_timeout_s, what)


def sink_offsets_of(cluster: Cluster, wanted: Mapping[PartitionId, Sequence[int]], what: str
                    ) -> dict[PartitionId, dict[int, int]]:
    """For each sink partition, the sink offset of each record of the job's whose source offset is wanted (an
    ascending list; absent: not in the sink): one search for where the first is, then one read forward to the
    last, all partitions together (the erase audit's notes a crash lost: a stage's whole range at once)."""
    ranges = cluster.committed_ranges(wanted)
    found: dict[PartitionId, dict[int, int]] = {p: {} for p in wanted}
    sought = {p: set(offsets) for p, offsets in wanted.items()}

    def each(pid: PartitionId, m) -> bool:
        offset = source_offset(m.headers())
        if offset in sought[pid]:
            found[pid][offset] = m.offset()
        return offset is not None and offset >= wanted[pid][-1]
    with contextlib.closing(range_reader(cluster.settings_with_bootstrap, "positions")) as consumer:
        starts = _translate(consumer, {(p, o[0]) for p, o in wanted.items()}, ranges, cluster.connect_timeout_s, what)
        read_ranges(consumer, {p: (starts[(p, o[0])].sink_offset, ranges[p][1]) for p, o in wanted.items()},
                    cluster.connect_timeout_s, what, each)
    return found


def first_at_or_after_all(cluster: Cluster, positions: Iterable[tuple[PartitionId, int]], what: str
                          ) -> dict[tuple[PartitionId, int], SinkPosition | None]:
    """For each (partition of ``cluster``, offset): the first record of the job's at or after it (None: none
    before the partition's end)."""
    positions = set(positions)
    ranges = cluster.committed_ranges({p for p, _ in positions})
    with contextlib.closing(range_reader(cluster.settings_with_bootstrap, "positions")) as consumer:
        return _first_at_or_after(consumer, positions, ranges, cluster.connect_timeout_s, what)


def _translate(consumer: Consumer, wanted: set[tuple[PartitionId, int]], ranges: Mapping[PartitionId, tuple[int, int]],
               timeout_s: float, what: str) -> dict[tuple[PartitionId, int], SinkPosition]:
    """The binary searches in step: each step reads every search's middle record together."""
    search = {w: list(ranges[w[0]]) for w in wanted}
    while open_ := {w: b for w, b in search.items() if b[0] < b[1]}:
        probes = {w: (lo + hi) // 2 for w, (lo, hi) in open_.items()}
        found = _first_at_or_after(consumer, set((w[0], mid) for w, mid in probes.items()), ranges, timeout_s, what)
        for w, mid in probes.items():
            there = found[(w[0], mid)]
            if there is None or there.source_offset >= w[1]:
                search[w][1] = mid
            else:
                search[w][0] = there.sink_offset + 1
    found = _first_at_or_after(consumer, {(w[0], b[0]) for w, b in search.items()}, ranges, timeout_s, what)
    return {w: found[(w[0], b[0])] or SinkPosition(ranges[w[0]][1], None) for w, b in search.items()}


def _first_at_or_after(consumer: Consumer, positions: set[tuple[PartitionId, int]],
                       ranges: Mapping[PartitionId, tuple[int, int]], timeout_s: float, what: str
                       ) -> dict[tuple[PartitionId, int], SinkPosition | None]:
    """A partition with several positions is read once per position, all partitions' n-th positions together."""
    by_partition: dict[PartitionId, list[int]] = {}
    for pid, offset in positions:
        by_partition.setdefault(pid, []).append(offset)
    found: dict[tuple[PartitionId, int], SinkPosition | None] = {}
    for n in range(max((len(o) for o in by_partition.values()), default=0)):
        starts = {p: sorted(o)[n] for p, o in by_partition.items() if len(o) > n}
        found |= _first_after(consumer, starts, {p: r[1] for p, r in ranges.items()}, timeout_s, what)
    return found


def _first_after(consumer: Consumer, starts: Mapping[PartitionId, int], ends: Mapping[PartitionId, int],
                 timeout_s: float, what: str) -> dict[tuple[PartitionId, int], SinkPosition | None]:
    found: dict[tuple[PartitionId, int], SinkPosition | None] = {(p, o): None for p, o in starts.items()}

    def first(pid: PartitionId, m) -> bool:
        offset = source_offset(m.headers())
        if offset is not None:
            found[(pid, starts[pid])] = SinkPosition(m.offset(), offset)
        return offset is not None
    read_ranges(consumer, {p: (o, ends.get(p, 0)) for p, o in starts.items()}, timeout_s, what, first, len(starts))
    return found
