"""Keyless records under compaction.keyless.policy=dead-letter: to the dead-letter topic, in a transaction of
their own through the task's producer, in the source partition's number (topic sync gives that topic as many
partitions as the largest source), each naming its source topic, partition and offset in headers, and its origin
as every sink record does (streaming.kafka.headers.origin_header): one that came from the sink's cluster is left out.
A record too big for its sink goes there too, with the same headers, in the emission's own transaction
(streaming.kafka.sink.task_emitter)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterable

from confluent_kafka import Producer

from streaming.kafka.headers import offset_header
from streaming.kafka.headers.offset_header import OFFSET_HEADER
from streaming.kafka.headers.origin_header import Origins
from streaming.log.record import LogRecord
from streaming.partition_id import PartitionId

if TYPE_CHECKING:  # the emitter sends a record too big for its sink here itself
    from streaming.kafka.sink.task_emitter import TaskEmitter

TOPIC_HEADER = "kcompact.topic"  # where the record came from
PARTITION_HEADER = "kcompact.partition"


def sink_headers(r: LogRecord, origins: Origins) -> list[tuple[str, bytes | None]]:
    """A log record's headers as a sink record carries them: its own, its source offset, then its origin."""
    return origins.sink_headers([(h["key"], h["value"]) for h in r["headers"]] +
                                [(OFFSET_HEADER, offset_header.encode(r["offset"]))])


def source_headers(source: PartitionId) -> list[tuple[str, bytes | None]]:
    """What a dead letter carries after its sink headers: the source partition it came from."""
    return [(TOPIC_HEADER, source.topic.encode()), (PARTITION_HEADER, str(source.partition).encode())]


def dead_letter(emitter: TaskEmitter, topic: str, source: PartitionId, records: Iterable[LogRecord]) -> int:
    """One committed transaction of ``records`` of ``source`` to ``topic``; how many."""
    where = source_headers(source)

    def produce(producer: Producer) -> int:
        n = 0
        for r in records:
            headers = sink_headers(r, emitter.origins)
            if emitter.origins.looped(headers):
                continue
            producer.produce(topic, key=r["key"], value=r["value"], timestamp=r["timestamp"],
                             partition=source.partition, headers=headers + where)
            n += 1
        return n
    return emitter.transaction(produce)
