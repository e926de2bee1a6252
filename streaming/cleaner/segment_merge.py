"""Which clean segments a pass merges though none of their records changes.

Kafka's cleaner rewrites every group of segments it cleans, so a log rolled each trigger (max.compaction.lag.ms)
keeps segments of about segment.bytes. This cleaner leaves a group alone when nothing in it changes (DirtyRange),
so without merging, a log whose every record is a new key would keep one more segment each pass, forever: each is
described in the manifest that every open of the log reads and every commit writes. The tail of a group merges
as a binary counter carries: once MERGE_FAN_IN segments trail it, each no larger than those after it together, so
a record is copied O(log n) times, a log keeps O(log n) small segments, and at most one pass in MERGE_FAN_IN - 1
writes a merge. A merged segment holds at most key_filter.MAX_KEYS records, so it keeps the key filter that lets
later passes leave it unread.
"""

from __future__ import annotations

from typing import Sequence

from streaming.log import PartitionLog, key_filter
from streaming.log.segment import SegmentMeta

MERGE_FAN_IN = 4


def merge_tail(group: Sequence[SegmentMeta], clean_below: int) -> list[SegmentMeta]:
    """The trailing segments of an unchanged group to merge into one ([]: none). Only segments clean before the pass
    (below ``clean_below``, its first dirty offset) take part: what the pass cleaned is what emission reads next,
    from its own small objects. Only segments with a key filter take part, the rest being read by every pass anyway."""
    tail = [s for s in group if s.next_offset <= clean_below]
    start = len(tail)
    size = records = 0
    while start and _joins(tail[start - 1], size, records, newest=start == len(tail)):
        start -= 1
        size += tail[start].size_bytes
        records += tail[start].record_count
    return list(tail[start:]) if len(tail) - start >= MERGE_FAN_IN else []


def _joins(seg: SegmentMeta, size: int, records: int, newest: bool) -> bool:
    return (seg.key_filter is not None and records + seg.record_count <= key_filter.MAX_KEYS
            and (newest or seg.size_bytes <= size))


def merge(plog: PartitionLog, tail: Sequence[SegmentMeta], checked: set[int]) -> int:
    """The tail swapped for one segment of the same records; the bytes written. ``checked``: segments whose bytes
    the pass has checked already."""
    if not tail:
        return 0
    return plog.replace(tail, (b for s in tail for b in plog.segment_batches(s, check=s.base_offset not in checked))
                        ).size_bytes
