"""How far emission got, read back from the sink: the source offset the last committed record of each sink
partition carries (its kcompact.offset header), for every partition of a task with one read_committed
consumer. Each partition is read from a little below its last stable offset, and further back only where
that window held transaction markers or other writers' records alone, so the read costs a fetch or two
whatever the partitions hold.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping

from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient

from streaming.kafka.client_settings import client_settings
from streaming.kafka.headers.offset_header import source_offset
from streaming.kafka.source.range_read import range_reader, read_ranges
from streaming.kafka.sink.sink_state import SinkPartitionState, read_states, settled
from streaming.partition_id import PartitionId

WINDOW = 64  # records read back first; each further try reads 16 times as far
READ_TIMEOUT_S = 60.0
MARKERS_S = 10.0


@dataclass(frozen=True)
class LastMirrored:
    """A sink partition's last committed record of the job's: the source offset it carries, its time, and its
    own offset in the sink."""

    source_offset: int
    timestamp_ms: int
    sink_offset: int


def _last_records(consumer: Consumer, ranges: Mapping[PartitionId, tuple[int, int]], timeout_s: float
                  ) -> dict[PartitionId, LastMirrored | None]:
    """The last record of the job's among the committed records in each range (None: none there)."""
    last: dict[PartitionId, LastMirrored | None] = {p: None for p in ranges}

    def each(pid: PartitionId, m) -> bool:
        if (offset := source_offset(m.headers())) is not None:
            last[pid] = LastMirrored(offset, m.timestamp()[1], m.offset())
        return False
    read_ranges(consumer, ranges, timeout_s, "the sink's progress", each)
    return last


def read_last_mirrored(client_config: Mapping[str, str], states: Mapping[PartitionId, SinkPartitionState],
                       timeout_s: float = READ_TIMEOUT_S) -> dict[PartitionId, LastMirrored | None]:
    """Each partition's last committed record of the job's (None: none below its last stable offset)."""
    found: dict[PartitionId, LastMirrored | None] = {p: None for p in states}
    window = WINDOW
    wanted = {p: s for p, s in states.items() if s.stable > s.low}
    if not wanted:
        return found
    consumer = range_reader(client_config, "progress")
    try:
        while wanted:
            ranges = {p: (max(s.low, s.stable - window), s.stable) for p, s in wanted.items()}
            last = _last_records(consumer, ranges, timeout_s)
            for p, record in last.items():
                if record is not None:
                    found[p] = record
            wanted = {p: s for p, s in wanted.items() if last[p] is None and ranges[p][0] > s.low}
            window *= 16
    finally:
        consumer.close()
    return found


def committed_last_mirrored(client_config: Mapping[str, str], partitions: Iterable[PartitionId],
                            timeout_s: float = READ_TIMEOUT_S) -> dict[PartitionId, LastMirrored | None]:
    """read_last_mirrored of partitions whose states are read first (see committed_progress)."""
    admin = AdminClient(client_settings(dict(client_config)))
    read = lambda pids: read_states(admin, pids, timeout_s)  # noqa: E731
    return read_last_mirrored(client_config, settled(read, read(list(partitions)), MARKERS_S, 0.2), timeout_s)


def committed_progress(client_config: Mapping[str, str], partitions: Iterable[PartitionId],
                       timeout_s: float = READ_TIMEOUT_S) -> dict[PartitionId, int]:
    """Each partition's progress (the source offset of its last committed record of the job's, -1 when it holds
    none), its states read first: for a reader outside a task (the drills, the
    chaos campaign); a partition of a topic that does not exist is left out. A partition showing a
    transaction open is read again for up to MARKERS_S: the markers of one just committed land a moment
    after its commit returns, later still from a coordinator that has just restarted."""
    found = committed_last_mirrored(client_config, partitions, timeout_s)
    return {p: -1 if r is None else r.source_offset for p, r in found.items()}
