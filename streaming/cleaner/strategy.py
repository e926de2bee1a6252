"""KIP-280 compaction strategies: which record of a key is the winner.

A record's rank is (version, offset), compared as a tuple. The offset strategy has no version, so the
highest offset wins, as in Kafka. With a version, the higher version wins and equal versions fall back to
the higher offset. A record without a version (header strategy, header absent or unusable) has the lowest
version, so a record that carries one always beats it, and two without one fall back to offset order.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from streaming.cleaner.config import CompactionConfig, Strategy
from streaming.log import decode_headers
from streaming.log.record import Header

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

    def versions(self, batch: pa.RecordBatch) -> np.ndarray:
        """One version per record of the batch (a batch of LOG_BATCH_SCHEMA)."""
        if self.strategy is Strategy.TIMESTAMP:
            return batch.column("timestamp").to_numpy(zero_copy_only=False).astype(np.int64)
        name = self.header
        out = np.empty(batch.num_rows, dtype=np.int64)
        for i, encoded in enumerate(batch.column("headers").to_pylist()):
            version, usable = header_version(decode_headers(encoded), name)
            if not usable:
                self.invalid_headers += 1
            out[i] = version
        return out
