"""A source partition, as the cleaner names it in logs, reports and errors."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PartitionId:
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"
