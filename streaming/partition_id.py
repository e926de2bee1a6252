"""A source partition: the one topic-partition type from the source to the log, the cleaner and the sink, and
offsets per partition in the JSON Spark's Kafka source reads and writes: {"topic": {"partition": offset}}."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Mapping


@dataclass(frozen=True, order=True)  # ordered by topic, then partition
class PartitionId:
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"

    @classmethod
    def from_name(cls, name: str) -> "PartitionId | None":
        """The partition a name made by str() stands for (TOPIC-PARTITION); None for any other name."""
        topic, _, partition = name.rpartition("-")
        return cls(topic, int(partition)) if topic and partition.isdecimal() else None


def offsets_to_json(offsets: Mapping[PartitionId, int]) -> str:
    """Spark's offsets JSON, topics and their partitions in order."""
    nested: dict[str, dict[str, int]] = {}
    for pid, offset in sorted(offsets.items()):
        nested.setdefault(pid.topic, {})[str(pid.partition)] = offset
    return json.dumps(nested)


def offsets_from_json(text: str) -> dict[PartitionId, int]:
    """offsets_to_json's reverse; ValueError or TypeError for anything not of that shape."""
    parsed = json.loads(text)
    if not isinstance(parsed, dict) or not all(isinstance(v, dict) for v in parsed.values()):
        raise ValueError("expected {\"topic\": {\"partition\": offset}}")
    return {PartitionId(t, int(p)): int(o) for t, parts in parsed.items() for p, o in parts.items()}
