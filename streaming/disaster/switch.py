"""What a switch to the DR site knows, gathered into its report: the sink's last mirrored record of every
partition (read, so exact), the source's ends (asked live, or the job's last knowledge when the source is
gone), the records past what was mirrored, and where the groups stand at the DR site.

The job's last knowledge of a source partition's end is the larger of what its last trigger saw (metrics.json,
with that trigger's time) and its own log's end (every record it appended, with their newest time): a failover
with the source gone still says what the job knew was there.
"""

from __future__ import annotations

import contextlib
import logging
import re
import time
from dataclasses import dataclass
from typing import Iterable, Mapping

from streaming.disaster.report import (NONE_MIRRORED, EndKnown, GroupPosition, PartitionRpo, Switch,
                                       SwitchReport)
from streaming.job.emission_note import EmissionNote
from streaming.job.metrics import read_doc
from streaming.job.spec import SavedJob
from streaming.kafka.admin import Cluster
from streaming.kafka.groups.group_positions import group_commits, held_offsets
from streaming.kafka.headers.origin_header import Headers, Origins
from streaming.kafka.sink.sink_progress import LastMirrored, committed_last_mirrored
from streaming.kafka.sink.sink_state import SinkPartitionState, read_states
from streaming.kafka.source.source_tail import TailFigures, read_tails
from streaming.log.manifest import load_newest
from streaming.names import names_text
from streaming.partition_id import PartitionId
from streaming.runtime.moments import Moment, reached
from streaming.state.layout import LogDir
from streaming.state.stores import StateDir

log = logging.getLogger(__name__)

TRANSACTIONS_POLL_S = 0.2  # how often a promote asks whether the transactions it waits for have ended


@dataclass(frozen=True)
class JobLog:
    """What the job's own log of a partition says: where it began, how far it got and its newest record's
    time, and its note of how far emission got (past records that came from the sink's cluster, which the
    sink's last record cannot show)."""

    start: int
    end: int
    newest_ms: int | None
    note: EmissionNote | None


@dataclass(frozen=True)
class KnownEnd:
    offset: int
    at_ms: int | None
    newest_ms: int | None  # the newest record's time the job saw below that end


@dataclass(frozen=True)
class SwitchSides:
    """The job of a state dir and its two clusters as a switch reaches them."""

    state: StateDir
    saved: SavedJob
    source: Cluster
    sink: Cluster
    groups: re.Pattern[str]

    def came_from_the_sink(self, headers: Headers | None) -> bool:
        """A source record whose origin is the DR site's cluster (a reverse mirror's, a two-way mirror's): the DR
        site holds it already, so it is no part of the RPO (the job's emission leaves it out too)."""
        saved = self.saved
        if saved.source_cluster_id is None or saved.sink_cluster_id is None:
            return False  # a job from before records named their origin
        return Origins(saved.source_cluster_id, saved.sink_cluster_id).looped(headers)

    def partitions(self) -> dict[PartitionId, PartitionId]:
        """Every mirrored source partition and its sink partition."""
        return {PartitionId(t, p): PartitionId(plan.sink, p)
                for t, plan in sorted(self.saved.topics.items()) for p in range(plan.partitions)}


def live_ends(sides: SwitchSides, timeout_s: float) -> dict[PartitionId, int] | None:
    """The source's ends now, or None when it does not answer within ``timeout_s`` (a source that is gone is
    what a failover expects; one that refuses us is an error)."""
    pids = sides.partitions()
    return sides.source.answering(lambda: sides.source.end_offsets(pids, timeout_s), "offsets of the mirrored topics",
                                  timeout_s)


def live_stable_ends(sides: SwitchSides, timeout_s: float) -> dict[PartitionId, tuple[int, int]] | None:
    """live_ends with each partition's high watermark, read together (Cluster.stable_ends)."""
    pids = sides.partitions()
    return sides.source.answering(lambda: sides.source.stable_ends(pids, timeout_s), "offsets of the mirrored topics",
                                  timeout_s)


def await_open_transactions(sides: SwitchSides, bound_s: float) -> dict[PartitionId, tuple[int, int]]:
    """Wait, up to ``bound_s``, until no transaction is open on a mirrored source partition; those still open
    then, each with its (last stable offset, high watermark). A cut read while one is open stops before its
    records, and DENY WRITE does not stop its commit (EndTxn is no write to the topic): they would land past the
    cut, neither mirrored nor counted. Kafka aborts a transaction open past its producer's
    transaction.timeout.ms (60 s by default), so the wait ends."""
    still = sides.source.open_transactions(sides.partitions(), timeout_s=sides.source.connect_timeout_s)
    if not still:
        return {}
    names = names_text([str(p) for p in sorted(still)])
    reached(Moment.OPEN_TRANSACTIONS, names)
    log.warning("waiting up to %.0fs for the transactions open on %d source partition(s) to end, so the cut comes "
                "after their records: %s", bound_s, len(still), names)
    deadline = time.monotonic() + bound_s
    while still and time.monotonic() < deadline:
        time.sleep(TRANSACTIONS_POLL_S)
        still = sides.source.open_transactions(still, timeout_s=sides.source.connect_timeout_s)
    if still:
        log.warning("transactions still open after %.0fs on %d source partition(s): the cut is taken before them, "
                    "and the report counts their records as open: %s", bound_s, len(still),
                    names_text([str(p) for p in sorted(still)]))
    return still


def job_logs(sides: SwitchSides, pids: Iterable[PartitionId]) -> dict[PartitionId, JobLog]:
    """The job's logs of ``pids`` (those it never ingested are absent): read only where a report needs them,
    a manifest and a note each."""
    found: dict[PartitionId, JobLog] = {}
    for pid in pids:
        log_dir = LogDir.of(sides.state, pid)
        manifest = load_newest(sides.state.storage, log_dir.directory).manifest
        if manifest is None or not manifest.segments:
            continue
        newest = max((s.largest_timestamp for s in manifest.segments if s.largest_timestamp is not None), default=None)
        note = EmissionNote.of(manifest.marks, sides.state.storage, log_dir.directory)
        found[pid] = JobLog(manifest.segments[0].base_offset, manifest.segments[-1].next_offset, newest, note)
    return found


def known_ends(sides: SwitchSides, logs: Mapping[PartitionId, JobLog]) -> dict[PartitionId, KnownEnd]:
    """The job's last knowledge of each source partition's end: the larger of what its last trigger saw
    (with that trigger's time) and its log's end."""
    doc = read_doc(sides.state)
    seen = {} if doc is None else {p.pid: p.source_end_offset for p in doc.partitions if p.source_end_offset is not None}
    found: dict[PartitionId, KnownEnd] = {}
    for pid in sides.partitions():
        log, end = logs.get(pid), seen.get(pid)
        if log is not None and (end is None or log.end >= end):
            found[pid] = KnownEnd(log.end, doc.at_ms if doc is not None and end == log.end else None, log.newest_ms)
        elif end is not None:
            found[pid] = KnownEnd(end, doc.at_ms, None if log is None else log.newest_ms)
    return found


def first_unmirrored(last: LastMirrored | None, log: JobLog | None, sink_cluster_id: str | None,
                     sink: SinkPartitionState | None = None) -> int:
    """The first source offset the DR site does not hold: after the sink's last record, or past the records
    after it that emission left out (they came from the sink's cluster); with nothing mirrored, where the
    job's log began (what came before it was never the job's to mirror). Past what the log's note says was
    committed while the sink partition (its state ``sink``) still holds the offsets of those records: the
    broker's cleaner may have removed them (another writer wrote their keys), never the DR site's copy."""
    note = None if log is None else log.note
    if note is not None and sink is not None and note.kept_by(sink.topic_id, sink.low, sink.high):
        return max(-1 if last is None else last.source_offset, note.emitted_up_to) + 1
    if last is None:
        return 0 if log is None else log.start
    if log is None or log.note is None or sink_cluster_id is None:
        return last.source_offset + 1
    return log.note.resumes_after(last.source_offset, sink_cluster_id) + 1


def last_mirrored(sides: SwitchSides) -> dict[PartitionId, LastMirrored | None]:
    """By source partition: the sink's last committed record of the job's."""
    sinks = sides.partitions()
    read = committed_last_mirrored(sides.sink.settings_with_bootstrap, sinks.values())
    return {source: read.get(sink) for source, sink in sinks.items()}


@dataclass(frozen=True)
class Unmirrored:
    """Past the sink's last record of each partition: where the DR site's gap begins (after the records that
    emission left out as looped, which the job's logs name) and, with the source's ends, the records there
    counted by reading them (None: they stopped coming within the timeout)."""

    mirrored: Mapping[PartitionId, LastMirrored | None]
    logs: Mapping[PartitionId, JobLog]
    first: Mapping[PartitionId, int]
    tails: Mapping[PartitionId, TailFigures] | None

    @property
    def maybe_records(self) -> bool:
        """Records up to the ends that the DR site may not hold (offsets alone would count transaction
        markers); a tail that could not be read may hold some."""
        return self.tails is None or any(t.records for t in self.tails.values())


def unmirrored(sides: SwitchSides, mirrored: Mapping[PartitionId, LastMirrored | None],
               ends: Mapping[PartitionId, int] | None, timeout_s: float) -> Unmirrored:
    """``ends``: the source's (None: it did not answer, so every log is read for the job's knowledge of them)."""
    pids = sides.partitions()
    logs = job_logs(sides, [p for p in pids if ends is None or ends[p] > _next(mirrored[p])])
    noted = [pids[p] for p, log in logs.items() if log.note is not None]
    states = (sides.sink.answering(lambda: read_states(sides.sink.admin, noted, timeout_s),
                                   "states of the sink partitions", timeout_s) if noted else None) or {}
    first = {p: first_unmirrored(mirrored[p], logs.get(p), sides.saved.sink_cluster_id, states.get(pids[p]))
             for p in pids}
    tails: Mapping[PartitionId, TailFigures] | None = None
    if ends is not None:
        with contextlib.suppress(TimeoutError):
            tails = read_tails(sides.source.settings_with_bootstrap,
                               {p: (first[p], end) for p, end in ends.items() if end > first[p]}, timeout_s,
                               left_out=sides.came_from_the_sink)
    return Unmirrored(mirrored, logs, first, tails)


def report(sides: SwitchSides, switch: Switch, dry_run: bool, ends: Mapping[PartitionId, int] | None,
           timeout_s: float, fenced: tuple[str, ...] = (), groups_synced: bool = False,
           notes: tuple[str, ...] = (), past: Unmirrored | None = None,
           open_at: Mapping[PartitionId, tuple[int, int]] | None = None) -> SwitchReport:
    """The report from the sink as it is now; ``ends``: the source's live ends (None: it did not answer);
    ``past``: what lies past the sink's last records, where the caller read it since the sink last changed;
    ``open_at``: the partitions with a transaction open past their end, as the caller read them."""
    now_ms = int(time.time() * 1000)
    open_at = open_at or {}
    if open_at:
        pending = sum(hw - lso for lso, hw in open_at.values())
        notes = (*notes, f"{pending:,} records (by offset, at most) in transactions still open on {len(open_at)} "
                         f"source partition(s), past their end: not mirrored, and they may yet commit: "
                         f"{names_text([f'{p} from offset {lso}' for p, (lso, _) in sorted(open_at.items())])}")
    past = unmirrored(sides, last_mirrored(sides), ends, timeout_s) if past is None else past
    mirrored, logs, first, tails = past.mirrored, past.logs, past.first, past.tails
    pids = sides.partitions()
    if ends is not None and tails is None:
        notes = (*notes, f"the records past what was mirrored stopped coming for {timeout_s:.0f}s: "
                         f"counted by offset")
    known = known_ends(sides, logs) if ends is None else {}
    rows = []
    for pid, sink in pids.items():
        last = mirrored[pid]
        offset = NONE_MIRRORED if last is None else last.source_offset
        stamp = None if last is None else last.timestamp_ms
        if tails is not None:
            tail = tails.get(pid, TailFigures())
            lso_hw = open_at.get(pid)
            rows.append(PartitionRpo(pid.topic, pid.partition, sink.topic, offset, stamp, ends[pid], EndKnown.LIVE,
                                     now_ms, tail.records, _span(stamp if stamp is not None else tail.oldest_ms,
                                                                 tail.newest_ms), "read", first[pid],
                                     0 if lso_hw is None else lso_hw[1] - lso_hw[0]))
            continue
        end = KnownEnd(ends[pid], now_ms, None) if ends is not None else known.get(pid)
        if end is None:
            rows.append(PartitionRpo(pid.topic, pid.partition, sink.topic, offset, stamp, None,
                                     EndKnown.LAST_KNOWN, None, None, None, "offsets", first[pid]))
            continue
        behind = max(0, end.offset - first[pid])
        newest = end.newest_ms if end.at_ms is None else max(end.newest_ms or 0, end.at_ms)
        rows.append(PartitionRpo(pid.topic, pid.partition, sink.topic, offset, stamp, end.offset,
                                 EndKnown.LIVE if ends is not None else EndKnown.LAST_KNOWN, end.at_ms, behind,
                                 _span(stamp, newest) if behind else 0, "offsets", first[pid]))
    groups = group_positions(sides, rows, ends is not None)
    return SwitchReport(switch, now_ms, dry_run, ends is not None, tuple(rows), tuple(groups), fenced, groups_synced,
                        notes)


def group_positions(sides: SwitchSides, rows: list[PartitionRpo], source_live: bool) -> list[GroupPosition]:
    """Where each group stands at the DR site, the source offset that stands for, and what it will not see."""
    by_sink = {PartitionId(r.sink_topic, r.partition): r for r in rows}
    held = held_offsets(sides.sink, sides.groups, by_sink)
    commits: dict[tuple[str, PartitionId], int] = {}
    if source_live:
        for group in sorted({h.group for h in held}):
            wanted = [PartitionId(by_sink[h.sink].topic, h.sink.partition) for h in held if h.group == group]
            for pid, offset in group_commits(sides.source, group, wanted).items():
                commits[(group, pid)] = offset
    positions = []
    for h in held:
        row = by_sink[h.sink]
        first = row.first_unmirrored_offset
        stands_for = first if h.source_offset is None else h.source_offset
        committed = commits.get((h.group, PartitionId(row.topic, row.partition)))
        reads_from = max(stands_for, first, committed or 0)
        unseen = None if row.source_end_offset is None else max(0, row.source_end_offset - reads_from)
        consumed = 0 if committed is None else max(0, committed - first)
        positions.append(GroupPosition(h.group, row.topic, row.partition, row.sink_topic, h.offset, stands_for,
                                       committed, unseen, consumed))
    return positions


def _next(last: LastMirrored | None) -> int:
    """The first source offset the sink does not hold."""
    return 0 if last is None else last.source_offset + 1


def _span(mirrored_ms: int | None, newest_ms: int | None) -> int | None:
    if newest_ms is None:
        return 0
    return None if mirrored_ms is None else max(0, newest_ms - mirrored_ms)
