"""The records of a source past what was mirrored, read: counted for the RPO of a switch, and handed one by
one to failback, which exports the diverged tail. One read_committed consumer reads every partition's range
together, so a cluster's worth of partitions costs a few fetches, not a round trip each."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping

from streaming.kafka.clients import TopicRecord
from streaming.kafka.headers.origin_header import Headers
from streaming.kafka.source.range_read import range_reader, read_ranges
from streaming.partition_id import PartitionId


@dataclass
class TailFigures:
    records: int = 0
    oldest_ms: int | None = None  # the smallest and the largest record timestamp among them
    newest_ms: int | None = None

    def add(self, timestamp_ms: int) -> None:
        self.records += 1
        self.oldest_ms = timestamp_ms if self.oldest_ms is None else min(self.oldest_ms, timestamp_ms)
        self.newest_ms = timestamp_ms if self.newest_ms is None else max(self.newest_ms, timestamp_ms)


def read_tails(client_config: Mapping[str, str], ranges: Mapping[PartitionId, tuple[int, int]], timeout_s: float,
               each: Callable[[PartitionId, TopicRecord], None] | None = None,
               left_out: Callable[[Headers | None], bool] | None = None) -> dict[PartitionId, TailFigures]:
    """Each partition's committed records in [start, end): counted, and given to ``each`` in offset order.
    ``left_out``: by its headers, a record that is neither (one that came from the cluster the tail is
    measured against, which holds it already)."""
    figures = {p: TailFigures() for p in ranges}

    def counted(pid: PartitionId, m) -> bool:
        if left_out is not None and left_out(m.headers()):
            return False
        figures[pid].add(m.timestamp()[1])
        if each is not None:
            each(pid, TopicRecord(m.key(), m.value(), tuple(m.headers() or ()), m.offset(), m.timestamp()[1]))
        return False
    consumer = range_reader(client_config, "tail")
    try:
        read_ranges(consumer, ranges, timeout_s, "the records past what was mirrored", counted)
    finally:
        consumer.close()
    return figures
