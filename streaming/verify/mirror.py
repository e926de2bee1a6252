"""kcompact verify over two clusters: each mirrored partition's sink judged by a read of its source topic.

The source topic is read, not the compactor's log, so a log that went wrong is caught too. Both sides are
read with read_committed up to their last stable offset, so a job that runs meanwhile (with a transaction
open on the sink) is judged on what it committed.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Iterator, Mapping

from streaming.cleaner import CompactionConfig, Overrides
from streaming.job.spec import resolve_compaction_config
from streaming.partition_id import PartitionId
from streaming.kafka.admin import Cluster
from streaming.kafka.clients import scan
from streaming.kafka.headers.offset_header import source_offset
from streaming.kafka.failures import said_in_one_line
from streaming.kafka.sink.sink_state import read_states
from streaming.verify.oracle import PartitionVerdict, PendingWinners, SinkLatest, SinkRecord, SourceWinners, judge


HELD_S = 10.0  # a transaction open this long at the same offset is reported as left open


@dataclass(frozen=True)
class MirroredPair:
    source: str
    sink: str


def verify_topic(source: Cluster, sink: Cluster, pair: MirroredPair, overrides: Overrides,
                 config: CompactionConfig | None = None) -> Iterator[PartitionVerdict]:
    """One verdict per partition of the source topic, as each is done; a cluster that stops answering is a
    one-line error. ``config``: the topic's compaction config as the job resolved it (a state dir's saved
    job); None: resolved here from the source topic's settings and ``overrides``, as the job does."""
    source.metadata()  # a cluster that is away or refuses us is named first
    sink.metadata()
    with said_in_one_line(f"cannot verify {pair.source} -> {pair.sink}"):
        yield from _verdicts(source, sink, pair, config or resolve_compaction_config(
            source.explicit_settings(pair.source), pair.source, overrides))


def _verdicts(source: Cluster, sink: Cluster, pair: MirroredPair, config: CompactionConfig) -> Iterator[PartitionVerdict]:
    compacted = "compact" in source.topic_configs(pair.source, ["cleanup.policy"]).get("cleanup.policy", "")
    partitions = list(range(source.partition_count(pair.source)))
    sink_partitions = sink.partition_count(pair.sink)
    of_source = [PartitionId(pair.source, p) for p in partitions]
    source_ranges = {pid.partition: r for pid, r in source.offset_ranges(of_source).items()}
    source_ends = {pid.partition: o for pid, o in source.answer(lambda: source.end_offsets(of_source),
                                                                f"end offsets of {pair.source}").items()}
    of_sink = [PartitionId(pair.sink, p) for p in partitions if p < sink_partitions]
    sink_starts = {pid.partition: low for pid, (low, _) in sink.offset_ranges(of_sink).items()}
    sink_ends = {pid.partition: o for pid, o in sink.answer(lambda: sink.end_offsets(of_sink),
                                                            f"end offsets of {pair.sink}").items()}
    held = _held(sink, of_sink)
    for p in partitions:
        if p >= sink_partitions:
            yield judge(pair.source, pair.sink, p, SourceWinners(), _missing_partition(p), 0)
            continue
        latest = _sink_latest(sink.settings_with_bootstrap, pair.sink, p, sink_starts[p], sink_ends[p])
        if p in held:
            latest.faults.append(f"a transaction has been open at sink offset {held[p]} for {HELD_S:.0f}s and more: "
                                 f"read_committed readers stop there (kcompact status says whose it is)")
        low, end = source_ranges[p][0], source_ends[p]
        checked_end = max(low, min(latest.progress + 1, end))
        winners = _source_winners(source.settings_with_bootstrap, pair.source, p, config, low, checked_end)
        pending = PendingWinners(winners)
        for r in scan(source.settings_with_bootstrap, pair.source, p, checked_end, end):
            pending.add(r.key, r.timestamp_ms, r.headers, r.offset)
        yield judge(pair.source, pair.sink, p, winners, latest, low, _unchecked(low, compacted, latest.progress),
                    pending, end)


def _held(sink: Cluster, partitions: list[PartitionId]) -> dict[int, int]:
    """The partitions whose last stable offset stays below their high watermark, at the same offset, for HELD_S:
    a transaction left open, not one of a running job's that is about to commit."""
    def open_now() -> dict[int, int]:
        states = sink.answer(lambda: read_states(sink.admin, partitions, 30.0), f"the state of {len(partitions)} "
                             f"sink partitions")
        return {pid.partition: s.stable for pid, s in states.items() if s.open}
    held = open_now()
    deadline = time.monotonic() + HELD_S
    while held and time.monotonic() < deadline:
        time.sleep(0.5)
        now = open_now()
        held = {p: o for p, o in held.items() if now.get(p) == o}
    return held


def _sink_latest(client_config: Mapping[str, str], topic: str, partition: int, start: int, end: int) -> SinkLatest:
    latest = SinkLatest()
    for r in scan(client_config, topic, partition, start, end):
        latest.add(SinkRecord(r.key, r.value, source_offset(list(r.headers)), r.offset))
    return latest


def _source_winners(client_config: Mapping[str, str], topic: str, partition: int, config: CompactionConfig,
                    start: int, end: int) -> SourceWinners:
    winners = SourceWinners(config.compaction_strategy, config.compaction_strategy_header or "")
    for r in scan(client_config, topic, partition, start, end):
        winners.add(r.key, r.value, r.timestamp_ms, r.headers, r.offset)
    return winners


def _missing_partition(partition: int) -> SinkLatest:
    latest = SinkLatest()
    latest.faults.append(f"the sink topic has no partition {partition}")
    return latest


def _unchecked(log_start: int, compacted: bool, progress: int) -> str | None:
    notes = []
    if log_start > 0:
        notes.append(f"offsets [0, {log_start}) are gone from the source (retention or deletion)")
    if compacted and progress >= 0:
        notes.append(f"the source's broker compacts it, so records it removed below {progress + 1} were judged "
                     f"by the records it kept")
    return "; ".join(notes) or None
