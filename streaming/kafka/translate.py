"""Offset translation for consumers moving from a source topic to its compacted sink (MirrorMaker 2's
checkpoints, done from the sink itself): every sink record names its source offset, and sink records are in
source-offset order, so the first sink record at or past a source offset is found by binary search."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from streaming.kafka.clients import PartitionReader
from streaming.kafka.offset_header import source_offset

TIMEOUT_S = 30.0


@dataclass(frozen=True)
class SinkPosition:
    sink_offset: int            # where the consumer resumes on the sink
    source_offset: int | None   # the source offset of the record there; None at the sink's end


class SinkReader:
    """Reads single records of one sink partition (read_committed): the first at or after an offset. One
    consumer serves the whole search; close it (or use ``with``) when done."""

    def __init__(self, bootstrap_servers: str, topic: str, partition: int,
                 client_config: Mapping[str, str] | None = None) -> None:
        self._reader = PartitionReader({"bootstrap.servers": bootstrap_servers, **(client_config or {}),
                                        "group.id": f"kcompact-translate-{topic}-{partition}"}, topic, partition)
        try:
            self.low, self.high = self._reader.watermarks(TIMEOUT_S)
        except BaseException:
            self._reader.close()
            raise

    def __enter__(self) -> "SinkReader":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self._reader.close()

    def first_at_or_after(self, offset: int) -> SinkPosition | None:
        """The first compactor record at or after ``offset`` (records without a source offset are passed)."""
        for m in self._reader.read(offset, self.high, TIMEOUT_S, batch=1):
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
