"""Work spread over a few Spark tasks: a stage or a micro-batch over thousands of partitions, most with little
to do, costs a handful of tasks rather than one each. Light to import: Spark's planning process loads it."""

from __future__ import annotations

import heapq
from typing import Sequence, TypeVar

T = TypeVar("T")
# One partition's fixed cost in records' worth: opening its log, a fetch's or a transaction's round trips
# cost milliseconds, a record a microsecond or two.
ITEM_COST = 5_000


def spread(items: Sequence[T], records: Sequence[int], tasks: int) -> list[list[T]]:
    """The items in at most ``tasks`` groups of about equal work, in the items' order within a group: the
    heaviest first, each to the lightest group so far (LPT). An item's work is its records plus ITEM_COST."""
    weights = [ITEM_COST + n for n in records]
    bins: list[tuple[int, int, list[int]]] = [(0, i, []) for i in range(min(tasks, len(items)))]
    for k in sorted(range(len(items)), key=lambda k: -weights[k]):
        total, i, group = heapq.heappop(bins)
        group.append(k)
        heapq.heappush(bins, (total + weights[k], i, group))
    return [[items[k] for k in sorted(group)] for _, _, group in sorted(bins, key=lambda b: b[1]) if group]
