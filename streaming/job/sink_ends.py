"""Where each sink partition ended after the last stage that ran its log, kept in the state dir.

A stage trusts a log's own note of how far emission got only for partitions whose sink it has read in
this run, so a sink emptied or re-created while the job was down is filled again. Reading a sink
partition's last record is a request of its own, thousands of them for a whole cluster at every start. A
sink partition that ends where it ended after the last stage has received nothing since, so the note still
holds: one request per leader (the sink's end offsets) answers that for every partition at once.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from streaming.kafka.admin import Cluster
from streaming.log.storage import read_json, write_json
from streaming.partition_id import PartitionId
from streaming.state.layout import sink_ends_file
from streaming.state.stores import StateDir

log = logging.getLogger(__name__)


class SinkEnds:
    def __init__(self, state: StateDir, sink: Cluster, sinks: dict[str, str]) -> None:
        """``sinks``: each source topic's sink topic."""
        self.state, self.sink, self.sinks = state, sink, sinks
        doc = read_json(state.storage, sink_ends_file(state)) or {}
        self.ends = {pid: v for k, v in doc.get("ends", {}).items() if (pid := PartitionId.from_name(k)) is not None}

    def _now(self, pids: Iterable[PartitionId]) -> dict[PartitionId, int]:
        """The sink partitions' ends now, by source partition; none when the sink cluster does not answer."""
        by_sink = {PartitionId(self.sinks[p.topic], p.partition): p for p in pids if p.topic in self.sinks}
        try:
            ends = self.sink.end_offsets(by_sink)
        except Exception as exc:  # noqa: BLE001 (the stage reads the sink itself, and reports it away)
            log.debug("end offsets of %d sink partitions unavailable: %s", len(by_sink), exc)
            return {}
        return {by_sink[s]: o for s, o in ends.items()}

    def unchanged(self, pids: Iterable[PartitionId]) -> set[PartitionId]:
        """The partitions whose sink ends where the last stage that ran them left it."""
        known = [p for p in pids if p in self.ends]
        return {p for p, end in self._now(known).items() if self.ends[p] == end} if known else set()

    def after_stage(self, ran: Iterable[PartitionId], failed: Iterable[PartitionId]) -> None:
        """Note where the sinks of the partitions a stage ran end now; a partition whose task failed is
        forgotten, so the next start reads its sink."""
        ran, failed = list(ran), set(failed)
        if not ran:
            return
        now = self._now(p for p in ran if p not in failed)
        for p in ran:
            if p in now:
                self.ends[p] = now[p]
            else:
                self.ends.pop(p, None)
        write_json(self.state.storage, sink_ends_file(self.state), {"ends": {str(p): o for p, o in self.ends.items()}})
