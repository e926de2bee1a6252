"""Source offsets as Spark's Kafka source writes them: {"topic": {"partition": next offset}}.

Partition numbers are strings because offsets are JSON in Spark's checkpoint.
"""

from __future__ import annotations

import math

Offsets = dict[str, dict[str, int]]


def flatten(offsets: Offsets) -> dict[tuple[str, int], int]:
    return {(t, int(p)): o for t, parts in offsets.items() for p, o in parts.items()}


def nest(flat: dict[tuple[str, int], int]) -> Offsets:
    out: Offsets = {}
    for (t, p), o in sorted(flat.items()):
        out.setdefault(t, {})[str(p)] = o
    return out


def rate_limit(start: dict[tuple[str, int], int], until: dict[tuple[str, int], int],
               limit: int) -> dict[tuple[str, int], int]:
    """Spread ``limit`` offsets over partitions in proportion to their backlog, as Spark's Kafka source
    does: a partition's share is rounded down, except that a share below one is rounded up so small
    partitions are not starved."""
    sizes = {tp: end - start[tp] for tp, end in until.items() if tp in start and end > start[tp]}
    total = float(sum(sizes.values()))
    if total < 1:
        return dict(until)
    out = {}
    for tp, end in until.items():
        if tp not in sizes:
            out[tp] = end
            continue
        share = limit * (sizes[tp] / total)
        step = math.ceil(share) if share < 1 else math.floor(share)
        out[tp] = min(end, start[tp] + step)
    return out
