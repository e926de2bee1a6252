"""Which sealed segments a pass makes one: the groups it rewrites when a record in them changes, and the small clean
segments it merges though none of their records changes.

Kafka's cleaner rewrites every group of segments it cleans, so a log rolled each trigger (max.compaction.lag.ms)
keeps segments of about segment.bytes. This cleaner leaves a group alone when nothing in it changes (DirtyRange),
so without merging, a log whose every record is a new key would keep one more segment each pass, forever: each is
described in the manifest that every open of the log reads and every commit writes. The tail of a group merges
as a binary counter carries: once MERGE_FAN_IN segments trail it, each no larger than those after it together.
A merged segment holds at most key_filter.MAX_KEYS records, so it keeps the key filter that lets later passes leave
it unread; so a log keeps O(log MAX_KEYS) small segments plus one for about every MAX_KEYS / 2 records, a record is
copied O(log MAX_KEYS) times, and on average at most one pass in MERGE_FAN_IN - 1 writes a merge.
"""

from __future__ import annotations

from typing import Callable, Sequence

from streaming.log import PartitionLog, key_filter
from streaming.log.journal import JournalEvent
from streaming.log.segment import SegmentMeta

MERGE_FAN_IN = 4


def size_groups(sealed: Sequence[SegmentMeta], end_offset: int, segment_bytes: int) -> list[list[SegmentMeta]]:
    """Consecutive sealed segments below the end offset, grouped while their size fits segment.bytes (Kafka's
    groupSegmentsBySize): a rewritten group becomes one segment."""
    groups: list[list[SegmentMeta]] = []
    size = 0
    for seg in sealed:
        if seg.base_offset >= end_offset:
            break
        if groups and size + seg.size_bytes <= segment_bytes:
            groups[-1].append(seg)
            size += seg.size_bytes
        else:
            groups.append([seg])
            size = seg.size_bytes
    return groups


def merge_tail(group: Sequence[SegmentMeta], clean_below: int) -> list[SegmentMeta]:
    """The trailing segments of an unchanged group to merge into one ([]: none). Only segments below ``clean_below``
    take part (clean before the pass and in the sink): what emission reads next it reads from the objects the pass
    read, and the erase audit finds overdue tombstones by the timestamps of segments not yet emitted, which a merge
    would move. Only segments with a key filter take part, the rest being read by every pass anyway."""
    tail = [s for s in group if s.next_offset <= clean_below]
    start = len(tail)
    size = records = 0
    while start and _joins(tail[start - 1], size, records, newest=start == len(tail)):
        start -= 1
        size += tail[start].size_bytes
        records += tail[start].record_count
    return tail[start:] if len(tail) - start >= MERGE_FAN_IN else []


def _joins(seg: SegmentMeta, size: int, records: int, newest: bool) -> bool:
    """Whether the segment before a tail of ``size`` bytes and ``records`` records joins it: no larger than the tail
    (so each copy of a record at least doubles the segment it is in), and the merge still within a key filter."""
    return (seg.key_filter is not None and records + seg.record_count <= key_filter.MAX_KEYS
            and (newest or seg.size_bytes <= size))


def merge(plog: PartitionLog, tail: Sequence[SegmentMeta], checked: set[int],
          journal: Callable[[], Sequence[JournalEvent]] | None = None, checkpoint: int | None = None) -> SegmentMeta:
    """The tail swapped for one segment of the same records. ``checked``: segments whose bytes the pass has checked
    already; ``journal`` and ``checkpoint``: PartitionLog.replace's, for a merge that ends the pass."""
    batches = (b for s in tail for b in plog.segment_batches(s, check=s.base_offset not in checked))
    return plog.replace(tail, batches, journal=journal, checkpoint=checkpoint)
