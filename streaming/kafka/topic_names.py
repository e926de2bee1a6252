"""Topic names as Kafka and Spark's Kafka source treat them: which a subscription pattern takes."""

from __future__ import annotations

import re

INTERNAL_PREFIX = "__"  # Kafka's own topics (__consumer_offsets, __transaction_state)


def matches_pattern(pattern: str, topic: str) -> bool:
    """Spark's subscribePattern: the whole name matches; Kafka's internal topics never do."""
    return not topic.startswith(INTERNAL_PREFIX) and re.fullmatch(pattern, topic) is not None
