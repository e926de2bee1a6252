"""KIP-280 compaction strategies: which record of a key is the winner.

A record's rank is (version, offset), compared as a tuple. The offset strategy has no version, so the
highest offset wins, as in Kafka. With a version, the higher version wins and equal versions fall back to
the higher offset. A record without a version (header strategy, header absent or unusable) has the lowest
version, so a record that carries one always beats it, and two without one fall back to offset order.
"""

from __future__ import annotations

from typing import Sequence

from streaming.cleaner.config import CompactionConfig, Strategy
from streaming.log.record import Header, LogRecord

NO_VERSION = -(2**63)  # Long.MIN_VALUE: a version header holding exactly this value counts as absent
VERSION_BYTES = 8


def header_version(headers: list[Header], name: str) -> tuple[int, bool]:
    """(version, usable) from the last occurrence of header ``name`` (8-byte big-endian signed long).

    ``usable`` is False when the header is present but not 8 bytes (or null): such records are ranked as
    having no version, and the caller counts them.
    """
    for h in reversed(headers):
        if h["key"] == name:
            v = h["value"]
            if v is None or len(v) != VERSION_BYTES:
                return NO_VERSION, False
            return int.from_bytes(v, "big", signed=True), True
    return NO_VERSION, True


class VersionReader:
    """Extracts versions for a chunk of records under one configured strategy."""

    def __init__(self, config: CompactionConfig) -> None:
        self.strategy = config.compaction_strategy
        self.header = config.compaction_strategy_header or ""
        self.invalid_headers = 0

    @property
    def versioned(self) -> bool:
        return self.strategy is not Strategy.OFFSET

    def versions(self, records: Sequence[LogRecord]) -> list[int]:
        if self.strategy is Strategy.TIMESTAMP:
            return [r["timestamp"] for r in records]
        name = self.header
        out = []
        for r in records:
            version, usable = header_version(r["headers"], name)
            if not usable:
                self.invalid_headers += 1
            out.append(version)
        return out
