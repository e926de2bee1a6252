"""What a pass's map phase learned that lets its recopy leave segments unread (Cleaner._recopy)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from streaming.log import key_filter
from streaming.log.segment import SegmentMeta


@dataclass
class DirtyRange:
    """What the map phase learned of the pass's dirty range, to know which segments the recopy need not read:
    - whether each of its records is its key's winner as it stands (each key once, none a tombstone, none
      keyless), so a segment of it the map checked cannot change, until a clean record outranks one of its records;
    - the fingerprints of its mapped keys, so a clean segment whose key filter holds none of them, with no
      tombstone due to go, cannot change either."""

    start: int
    now_ms: int
    new_keys_only: bool = True
    outranked: bool = False
    prints: np.ndarray | None = None  # key_filter.asked's
    _clean_stays: dict[int, bool] = field(default_factory=dict)

    def unchanged(self, segments: Sequence[SegmentMeta], checked: set[int]) -> bool:
        """Whether these segments (the rest of a group) stay as they are."""
        return all(self._stays(s, checked) for s in segments)

    def unchanged_from(self, group: Sequence[SegmentMeta], checked: set[int]) -> int:
        """The first index from which the group's segments stay as they are, as known now (len(group): none): one
        scan from the end, so a group of many small segments is not scanned again at each of them."""
        start = len(group)
        while start and self._stays(group[start - 1], checked):
            start -= 1
        return start

    def _stays(self, seg: SegmentMeta, checked: set[int]) -> bool:
        if seg.next_offset > self.start:
            return (self.new_keys_only and not self.outranked and seg.base_offset >= self.start
                    and seg.base_offset in checked)
        stays = self._clean_stays.get(seg.base_offset)
        if stays is None:
            stays = self._clean_stays[seg.base_offset] = (
                seg.key_filter is not None and self.prints is not None
                and (seg.min_delete_horizon_ms is None or seg.min_delete_horizon_ms > self.now_ms)
                and not key_filter.holds_any(seg.key_filter, self.prints))
        return stays
