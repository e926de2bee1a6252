"""A source partition: the one topic-partition type from the source to the log, the cleaner and the sink."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, order=True)  # ordered by topic, then partition
class PartitionId:
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"
