"""kcompact verify over two clusters: each mirrored partition's sink judged by a read of its source topic.

The source topic is read, not the compactor's log, so a log that went wrong is caught too. Both sides are
read with read_committed up to their last stable offset, so a job that runs meanwhile (with a transaction
open on the sink) is judged on what it committed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator, Mapping

from streaming.cleaner import CompactionConfig, Overrides
from streaming.job.spec import resolve_compaction_config
from streaming.partition_id import PartitionId
from streaming.kafka.admin import Cluster
from streaming.kafka.clients import scan
from streaming.kafka.offset_header import source_offset
from streaming.kafka.failures import said_in_one_line
from streaming.verify.oracle import PartitionVerdict, PendingWinners, SinkLatest, SinkRecord, SourceWinners, judge


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
    for p in partitions:
        if p >= sink_partitions:
            yield judge(pair.source, pair.sink, p, SourceWinners(), _missing_partition(p), 0)
            continue
        latest = _sink_latest(sink.settings_with_bootstrap, pair.sink, p, sink_starts[p], sink_ends[p])
        low, end = source_ranges[p][0], source_ends[p]
        checked_end = max(low, min(latest.progress + 1, end))
        winners = _source_winners(source.settings_with_bootstrap, pair.source, p, config, low, checked_end)
        pending = PendingWinners(winners)
        for r in scan(source.settings_with_bootstrap, pair.source, p, checked_end, end):
            pending.add(r.key, r.timestamp_ms, r.headers, r.offset)
        yield judge(pair.source, pair.sink, p, winners, latest, low, _unchecked(low, compacted, latest.progress),
                    pending, end)


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
