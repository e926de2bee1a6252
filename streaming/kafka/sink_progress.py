"""How far emission got, read back from the sink: the source offset the last committed record of each sink
partition carries (its kcompact.offset header), for every partition of a task with one read_committed
consumer. Each partition is read from a little below its last stable offset, and further back only where
that window held transaction markers or other writers' records alone, so the read costs a fetch or two
whatever the partitions hold.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from typing import Iterable, Mapping

from confluent_kafka import Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient

from streaming.kafka.client_settings import client_settings
from streaming.kafka.failures import UNUSED_GROUP_REFUSED
from streaming.kafka.offset_header import source_offset
from streaming.kafka.sink_state import SinkPartitionState, read_states, settled
from streaming.partition_id import PartitionId

WINDOW = 64  # records read back first; each further try reads 16 times as far
READ_TIMEOUT_S = 60.0
MARKERS_S = 10.0
POLL_S = 0.1


@dataclass(frozen=True)
class LastMirrored:
    """A sink partition's last committed record of the job's: the source offset it carries, and its time."""

    source_offset: int
    timestamp_ms: int


def _reader(client_config: Mapping[str, str]) -> Consumer:
    """A consumer that joins no group (its id is its own) and waits briefly at a partition's end: a read that
    reaches the end of one partition should not wait out the broker's long poll for the others."""
    return Consumer(client_settings({**client_config, "group.id": f"kcompact-progress-{uuid.uuid4().hex}",
                                     "enable.auto.commit": False, "isolation.level": "read_committed",
                                     "auto.offset.reset": "earliest", "fetch.wait.max.ms": 10}))


def _last_records(consumer: Consumer, ranges: Mapping[PartitionId, tuple[int, int]], timeout_s: float
                  ) -> dict[PartitionId, LastMirrored | None]:
    """The last record of the job's among the committed records in each range (None: none there).
    A range ends when the consumer's position passes its end, never at an empty poll: transaction markers
    land a moment after a commit, and a slow fetch is no end either."""
    last: dict[PartitionId, LastMirrored | None] = {p: None for p in ranges}
    consumer.assign([TopicPartition(p.topic, p.partition, start) for p, (start, _) in ranges.items()])
    left = dict(ranges)
    deadline = time.monotonic() + timeout_s
    while left:
        if time.monotonic() > deadline:
            raise TimeoutError(f"the sink's progress could not be read within {timeout_s:.0f}s from "
                               f"{', '.join(str(p) for p in list(left)[:5])}")
        for m in consumer.consume(1000, timeout=POLL_S):
            if m.error() is not None:
                if m.error().code() == UNUSED_GROUP_REFUSED:
                    continue
                raise KafkaException(m.error())
            pid = PartitionId(m.topic(), m.partition())
            if pid in left and m.offset() < left[pid][1] and (offset := source_offset(m.headers())) is not None:
                last[pid] = LastMirrored(offset, m.timestamp()[1])
        positions = consumer.position([TopicPartition(p.topic, p.partition) for p in left])
        done = [p for tp in positions if tp.offset >= left[p := PartitionId(tp.topic, tp.partition)][1]]
        if done:
            consumer.pause([TopicPartition(p.topic, p.partition) for p in done])
            for p in done:
                del left[p]
    assigned = [TopicPartition(p.topic, p.partition) for p in ranges]
    consumer.resume(assigned)  # a partition read again further back must not stay paused
    consumer.unassign()
    return last


def read_progress(client_config: Mapping[str, str], states: Mapping[PartitionId, SinkPartitionState],
                  timeout_s: float = READ_TIMEOUT_S) -> dict[PartitionId, int]:
    """Each partition's progress: the source offset of its last committed record of the job's, -1 when it
    holds none below its last stable offset."""
    found = read_last_mirrored(client_config, states, timeout_s)
    return {p: -1 if found[p] is None else found[p].source_offset for p in states}


def read_last_mirrored(client_config: Mapping[str, str], states: Mapping[PartitionId, SinkPartitionState],
                       timeout_s: float = READ_TIMEOUT_S) -> dict[PartitionId, LastMirrored | None]:
    """Each partition's last committed record of the job's (None: none below its last stable offset)."""
    found: dict[PartitionId, LastMirrored | None] = {p: None for p in states}
    window = WINDOW
    wanted = {p: s for p, s in states.items() if s.stable > s.low}
    if not wanted:
        return found
    consumer = _reader(client_config)
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
    """read_progress of partitions whose states are read first: for a reader outside a task (the drills, the
    chaos campaign); a partition of a topic that does not exist is left out. A partition showing a
    transaction open is read again for up to MARKERS_S: the markers of one just committed land a moment
    after its commit returns, later still from a coordinator that has just restarted."""
    found = committed_last_mirrored(client_config, partitions, timeout_s)
    return {p: -1 if r is None else r.source_offset for p, r in found.items()}
