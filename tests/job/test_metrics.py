"""The metrics document: typed on both sides of metrics.json, and a snapshot of the running totals."""

from __future__ import annotations

import json

from streaming.cleaner import CleanerMetrics, PartitionFigures
from streaming.job.compact import StageReport
from streaming.job.metrics import (EraseLatency, JobCounters, JobMetricsCollector, MetricsDocument, TableState, read_doc,
                                   update_group_sync, update_tables, write_doc)
from streaming.partition_id import PartitionId
from streaming.state.stores import open_state_dir


def test_the_document_reads_back_as_written_and_keeps_the_totals_of_its_moment(tmp_path) -> None:
    a, b = PartitionId("t", 0), PartitionId("t", 1)
    totals, latency = JobCounters(batches=2, ingested=10), EraseLatency()
    latency.observe("sink", [2500])
    reports = [StageReport(a, emitted_up_to=4, log_end_offset=9, figures=PartitionFigures(cleanable_ratio=0.25)),
               StageReport(b, log_end_offset=3, erasures_overdue=1)]
    document = MetricsDocument.of(7, CleanerMetrics(max_dirty_percent=25), totals, reports, {a: 12}, None, latency)
    totals.batches += 1
    latency.observe("sink", [10])
    assert document.job.batches == 2 and sum(document.erase_latency.buckets["sink"]) == 1
    assert [(p.ingest_lag, p.emit_lag) for p in document.partitions] == [(3, 4), (None, 3)]
    state = open_state_dir(str(tmp_path))
    write_doc(state, document)
    assert read_doc(state) == document == MetricsDocument.from_doc(json.loads(json.dumps(document.to_doc())))
    update_group_sync(state, {"rounds": 1, "last-sync-ms": None})
    assert read_doc(state).group_sync == {"rounds": 1, "last-sync-ms": None}


def test_a_state_dir_before_its_first_trigger_has_no_document(tmp_path) -> None:
    assert read_doc(open_state_dir(str(tmp_path))) is None


def test_the_tables_states_go_into_the_last_document_and_to_prometheus(tmp_path) -> None:
    state = open_state_dir(str(tmp_path))
    assert update_tables(state, (TableState("s.a", "ok"),)) is None  # before the first trigger: nothing to add to
    write_doc(state, MetricsDocument.of(7, CleanerMetrics(), JobCounters(), [], {}))
    tables = (TableState("s.a", "ok"), TableState("s.b", "BLOCKED", 5, "column x ..."))
    assert update_tables(state, tables).tables == tables == read_doc(state).tables
    collector = JobMetricsCollector()
    collector.update(read_doc(state))
    gauges = {(m.name, s.labels.get("table")): s.value for m in collector.collect() for s in m.samples
              if m.name.startswith("kcompact_table_")}
    assert gauges == {("kcompact_table_blocked", "s.a"): 0, ("kcompact_table_blocked", "s.b"): 1,
                      ("kcompact_table_failing", "s.a"): 0, ("kcompact_table_failing", "s.b"): 0}
