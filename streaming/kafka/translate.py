"""Offset translation for consumers moving from a source topic to its compacted sink (MirrorMaker 2's
checkpoints, done from the sink itself): every sink record names its source offset, and sink records are in
source-offset order, so the first sink record at or past a source offset is found by binary search."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from confluent_kafka import Consumer, TopicPartition

from streaming.kafka.client_log import with_client_log
from streaming.kafka.clients import committed_messages
from streaming.kafka.emitter import source_offset

TIMEOUT_S = 30.0


@dataclass(frozen=True)
class SinkPosition:
    sink_offset: int            # where the consumer resumes on the sink
    source_offset: int | None   # the source offset of the record there; None at the sink's end


class SinkReader:
    """Reads single records of one sink partition (read_committed): the first at or after an offset."""

    def __init__(self, bootstrap_servers: str, topic: str, partition: int,
                 client_config: Mapping[str, str] | None = None) -> None:
        self.topic, self.partition = topic, partition
        self.config = {"bootstrap.servers": bootstrap_servers, **(client_config or {}),
                       "group.id": f"kcompact-translate-{topic}-{partition}"}
        consumer = Consumer(with_client_log({**self.config, "isolation.level": "read_committed"}))
        try:
            self.low, self.high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=TIMEOUT_S,
                                                                 cached=False)
        finally:
            consumer.close()

    def first_at_or_after(self, offset: int) -> SinkPosition | None:
        """The first compactor record at or after ``offset`` (records without a source offset are passed)."""
        for m in committed_messages(self.config, self.topic, self.partition, offset, self.high, TIMEOUT_S):
            src = source_offset(m.headers())
            if src is not None:
                return SinkPosition(m.offset(), src)
        return None


def translate(reader: SinkReader, source_offset_: int) -> SinkPosition:
    """The sink position of the first record whose source offset is >= ``source_offset_``; the sink's end
    when there is none (everything up to there is emitted: the consumer resumes at the end)."""
    lo, hi = reader.low, reader.high
    while lo < hi:
        mid = (lo + hi) // 2
        found = reader.first_at_or_after(mid)
        if found is None or found.source_offset >= source_offset_:
            hi = mid
        else:
            lo = found.sink_offset + 1
    return reader.first_at_or_after(lo) or SinkPosition(reader.high, None)
