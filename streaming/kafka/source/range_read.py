"""Many partitions' ranges read together by one read_committed consumer that joins no group: the sink's
progress, the records past what was mirrored, the records where groups stand. A range ends when the
consumer's position passes its end, never at an empty poll: transaction markers land a moment after a commit,
and a slow fetch is no end either. A read fails when it stops moving, not after a fixed time: a long range that
keeps coming is work, a cluster that stopped answering is a fault to name soon."""

from __future__ import annotations

import time
import uuid
from typing import Callable, Mapping

from confluent_kafka import Consumer, KafkaException, Message, TopicPartition

from streaming.kafka.client_settings import client_settings
from streaming.kafka.failures import UNUSED_GROUP_REFUSED
from streaming.partition_id import PartitionId

POLL_S = 0.1


def range_reader(client_config: Mapping[str, str], purpose: str) -> Consumer:
    """A consumer whose group id is its own, waiting briefly at a partition's end: a read that reaches the end
    of one partition should not wait out the broker's long poll for the others."""
    return Consumer(client_settings({**client_config, "group.id": f"kcompact-{purpose}-{uuid.uuid4().hex}",
                                     "enable.auto.commit": False, "isolation.level": "read_committed",
                                     "auto.offset.reset": "earliest", "fetch.wait.max.ms": 10}))


def read_ranges(consumer: Consumer, ranges: Mapping[PartitionId, tuple[int, int]], timeout_s: float, what: str,
                each: Callable[[PartitionId, Message], bool], batch: int = 1000) -> None:
    """Each record in [start, end) of each partition, in offset order, to ``each``, which answers True when its
    partition needs no more; TimeoutError when no record comes and no position moves for ``timeout_s``. The
    consumer is left unassigned, nothing paused, for its next read. ``batch``: the records a poll waits for (a
    poll that gets fewer waits out POLL_S): a read of each partition's first record asks for one a partition,
    and for twice as many after each poll that finished none (records without what it looks for)."""
    left = {p: r for p, r in ranges.items() if r[0] < r[1]}
    if not left:
        return
    consumer.assign([TopicPartition(p.topic, p.partition, start) for p, (start, _) in left.items()])
    deadline = time.monotonic() + timeout_s
    at: dict[PartitionId, int] = {}
    while left:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: nothing came for {timeout_s:.0f}s from "
                               f"{', '.join(str(p) for p in list(left)[:5])}")
        done: set[PartitionId] = set()
        for m in consumer.consume(batch, timeout=POLL_S):
            if m.error() is not None:
                if m.error().code() == UNUSED_GROUP_REFUSED:  # this reader uses no group
                    continue
                raise KafkaException(m.error())
            pid = PartitionId(m.topic(), m.partition())
            if pid in left and pid not in done and m.offset() < left[pid][1] and each(pid, m):
                done.add(pid)
        positions = {PartitionId(tp.topic, tp.partition): tp.offset
                     for tp in consumer.position([TopicPartition(p.topic, p.partition) for p in left if p not in done])}
        if done or any(offset > at.get(p, -1) for p, offset in positions.items()):  # records, markers: it moves
            deadline = time.monotonic() + timeout_s
        if not done:
            batch = min(2 * batch, 1000)
        at |= positions
        done |= {p for p, offset in positions.items() if offset >= left[p][1]}
        if done:
            consumer.pause([TopicPartition(p.topic, p.partition) for p in done])
            for p in done:
                del left[p]
    consumer.resume([TopicPartition(p.topic, p.partition) for p in ranges])  # read again at the next read
    consumer.unassign()
