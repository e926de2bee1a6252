"""Offset translation for consumers moving from a source topic to its compacted sink (MirrorMaker 2's
checkpoints, done from the sink itself): every sink record names its source offset, and sink records are in
source-offset order, so the first sink record at or past a source offset is found by binary search."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Mapping

from confluent_kafka import Consumer, KafkaException, TopicPartition

from streaming.kafka.emitter import source_offset

TIMEOUT_S = 30.0


@dataclass(frozen=True)
class SinkPosition:
    sink_offset: int            # where the consumer resumes on the sink
    source_offset: int | None   # the source offset of the record there; None at the sink's end


class SinkReader:
    """Reads single records of one sink partition (read_committed): the first at or after an offset. Each
    read has a consumer of its own: one reassigned between reads can still hand out records fetched for
    its previous position."""

    def __init__(self, bootstrap_servers: str, topic: str, partition: int,
                 client_config: Mapping[str, str] | None = None) -> None:
        self.tp = TopicPartition(topic, partition)
        self.config = {"bootstrap.servers": bootstrap_servers, **(client_config or {}),
                       "group.id": f"kcompact-translate-{topic}-{partition}", "enable.auto.commit": False,
                       "isolation.level": "read_committed", "auto.offset.reset": "earliest"}
        consumer = Consumer(self.config)
        try:
            self.low, self.high = consumer.get_watermark_offsets(self.tp, timeout=TIMEOUT_S, cached=False)
        finally:
            consumer.close()

    def first_at_or_after(self, offset: int) -> SinkPosition | None:
        """The first compactor record at or after ``offset`` (records without a source offset are passed)."""
        consumer = Consumer(self.config)
        try:
            consumer.assign([TopicPartition(self.tp.topic, self.tp.partition, offset)])
            deadline = time.monotonic() + TIMEOUT_S
            while consumer.position([self.tp])[0].offset < self.high:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{self.tp.topic}-{self.tp.partition}: no record after offset {offset} "
                                       f"within {TIMEOUT_S:.0f}s")
                for m in consumer.consume(16, timeout=1.0):
                    if m.error() is not None:
                        raise KafkaException(m.error())
                    src = source_offset(m.headers())
                    if src is not None:
                        return SinkPosition(m.offset(), src)
            return None
        finally:
            consumer.close()


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
