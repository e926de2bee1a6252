"""How big a record is where it can be refused, so that a record its sink topic refuses never enters a transaction:
one the broker refuses fails the whole transaction, every partition of the task with it, stage after stage.

Two limits hold a record back. librdkafka refuses it at produce() when its size as librdkafka counts it (key,
value, headers and LIBRDKAFKA_OVERHEAD) passes the producer's ``message.max.bytes``. The broker refuses a record
batch bigger than the topic's ``max.message.bytes``; a record that does not fit in a batch of its own is refused
whatever the producer does (librdkafka never splits a batch). Both are counted uncompressed: librdkafka does so,
and a compressed batch is no bigger than its records but for a few bytes of framing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Sequence

import numpy as np

from streaming.kafka.headers.offset_header import OFFSET_HEADER
from streaming.kafka.headers.origin_header import ORIGIN_HEADER
from streaming.kafka.sink.record_produce import Columns

BATCH_HEADER = 61  # a v2 RecordBatch's header, before its records
LIBRDKAFKA_OVERHEAD = 36  # librdkafka's bound on a record's own fields (RD_KAFKAP_MESSAGE_V2_MAX_OVERHEAD)
BATCH_SIZE = 1_000_000  # librdkafka's default batch.size
_VARINT = 5  # the most bytes a 32-bit length takes as a varint


@dataclass(frozen=True)
class RecordLimits:
    """The largest record each topic a task's emitter writes takes (its ``max.message.bytes``, read once when
    the job planned the topic: streaming.job.topics) and where a record too big for its sink goes instead."""

    sinks: Mapping[str, int] = field(default_factory=dict)  # by sink topic; a topic not named: not known
    dead_letter_topic: str | None = None  # None: a record too big for its sink stops its partition there
    dead_letter_limit: int | None = None  # the dead-letter topic's max.message.bytes (None: not known)
    sources: Mapping[str, str] = field(default_factory=dict)  # the source topic of each sink: a dead letter names it

    def producer_settings(self) -> dict[str, int]:
        """A producer sized by the topics: ``message.max.bytes`` lets through the largest record any of them takes
        (librdkafka's count of a record is below the broker's), and ``batch.size`` keeps a batch of several records
        within the smallest (a first record of its own may pass it; the check of each record covers that)."""
        limits = [*self.sinks.values(), *([] if self.dead_letter_limit is None else [self.dead_letter_limit])]
        if not limits:
            return {}
        return {"message.max.bytes": min(max(1000, max(limits)), 1_000_000_000),
                "batch.size": max(1, min(BATCH_SIZE, min(limits) - BATCH_HEADER - 64))}


def varint_size(n: int) -> int:
    """Bytes of Kafka's (zigzag) varint of ``n``."""
    z = (n << 1) ^ (n >> 63)
    return max(1, (z.bit_length() + 6) // 7)


def _headers_size(headers: Sequence[tuple[str, bytes | None]]) -> int:
    return sum(varint_size(len(name := k.encode())) + len(name) + varint_size(-1 if v is None else len(v)) + len(v or b"")
               for k, v in headers)


def librdkafka_size(key: bytes | None, value: bytes | None, headers: Sequence[tuple[str, bytes | None]]) -> int:
    """The record's size as librdkafka holds it to message.max.bytes at produce()."""
    return LIBRDKAFKA_OVERHEAD + len(key or b"") + len(value or b"") + _headers_size(headers)


def batch_size(key: bytes | None, value: bytes | None, headers: Sequence[tuple[str, bytes | None]]) -> int:
    """The record batch holding only this record, as the broker holds it to the topic's max.message.bytes."""
    body = (3 + varint_size(-1 if key is None else len(key)) + len(key or b"") +  # attributes, both deltas 0
            varint_size(-1 if value is None else len(value)) + len(value or b"") +
            varint_size(len(headers)) + _headers_size(headers))
    return BATCH_HEADER + varint_size(body) + body


def batch_size_bounds(cols: Columns, extra: int) -> np.ndarray:
    """For each record of ``cols``, a bound on batch_size (and so on librdkafka_size) once the emitter has added
    headers of up to ``extra`` bytes: the log's Avro encoding of a record's headers is no smaller than Kafka's.
    Only the records over a limit by this bound are looked at one by one."""
    lengths = [np.diff(offsets).astype(np.int64) for offsets in (cols.key_offsets, cols.value_offsets,
                                                                 cols.header_offsets)]
    return BATCH_HEADER + 3 + 5 * _VARINT + extra + lengths[0] + lengths[1] + lengths[2]


def added_headers_bound(origin: bytes) -> int:
    """The most the emitter's own headers add to a record: its source offset, and its origin."""
    return (2 * _VARINT + len(OFFSET_HEADER) + 20) + (2 * _VARINT + len(ORIGIN_HEADER) + len(origin))
