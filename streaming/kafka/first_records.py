"""The first record of the job's at or after each of many sink positions, read together: a switch's report
looks up where every group stands on thousands of partitions, and one consumer for all of them costs a few
fetches where a reader a partition would cost a connection and a round trip each."""

from __future__ import annotations

import time
import uuid
from typing import Iterable, Mapping

from confluent_kafka import Consumer, KafkaException, TopicPartition

from streaming.kafka.client_settings import client_settings
from streaming.kafka.failures import UNUSED_GROUP_REFUSED
from streaming.kafka.offset_header import source_offset
from streaming.partition_id import PartitionId

POLL_S = 0.1


def source_offsets_at(client_config: Mapping[str, str], positions: Iterable[tuple[PartitionId, int]],
                      ends: Mapping[PartitionId, int], timeout_s: float) -> dict[tuple[PartitionId, int], int | None]:
    """For each (partition, offset): the source offset the first record of the job's at or after it names
    (None: none before the partition's end in ``ends``). A partition with several positions is read once per
    position, all partitions' n-th positions together."""
    by_partition: dict[PartitionId, list[int]] = {}
    for pid, offset in set(positions):
        by_partition.setdefault(pid, []).append(offset)
    found: dict[tuple[PartitionId, int], int | None] = {}
    consumer = Consumer(client_settings({**client_config, "group.id": f"kcompact-positions-{uuid.uuid4().hex}",
                                         "enable.auto.commit": False, "isolation.level": "read_committed",
                                         "auto.offset.reset": "earliest", "fetch.wait.max.ms": 10}))
    try:
        for n in range(max((len(o) for o in by_partition.values()), default=0)):
            starts = {p: sorted(o)[n] for p, o in by_partition.items() if len(o) > n}
            found |= _first_after(consumer, starts, ends, timeout_s)
    finally:
        consumer.close()
    return found


def _first_after(consumer: Consumer, starts: Mapping[PartitionId, int], ends: Mapping[PartitionId, int],
                 timeout_s: float) -> dict[tuple[PartitionId, int], int | None]:
    found: dict[tuple[PartitionId, int], int | None] = {(p, o): None for p, o in starts.items()}
    left = {p: o for p, o in starts.items() if o < ends.get(p, 0)}
    if not left:
        return found
    consumer.assign([TopicPartition(p.topic, p.partition, o) for p, o in left.items()])
    deadline = time.monotonic() + timeout_s
    while left:
        if time.monotonic() > deadline:
            raise TimeoutError(f"the records where the groups stand could not be read within {timeout_s:.0f}s from "
                               f"{', '.join(str(p) for p in list(left)[:5])}")
        done: set[PartitionId] = set()
        for m in consumer.consume(1000, timeout=POLL_S):
            if m.error() is not None:
                if m.error().code() == UNUSED_GROUP_REFUSED:
                    continue
                raise KafkaException(m.error())
            pid = PartitionId(m.topic(), m.partition())
            if pid in left and pid not in done and (offset := source_offset(m.headers())) is not None:
                found[(pid, left[pid])] = offset
                done.add(pid)
        positions = consumer.position([TopicPartition(p.topic, p.partition) for p in left if p not in done])
        done |= {p for tp in positions if tp.offset >= ends[p := PartitionId(tp.topic, tp.partition)]}
        for p in done:
            del left[p]
        if done:
            consumer.pause([TopicPartition(p.topic, p.partition) for p in done])
    consumer.unassign()
    return found
