"""The switch report as a person and a program read it: the summary first, the partitions behind, the groups,
and the document kept in the state dir read back whole."""

from __future__ import annotations

from streaming.disaster.report import EndKnown, GroupPosition, PartitionRpo, Switch, SwitchReport


def _row(partition: int, last: int, end: int | None, rpo: int | None, known: EndKnown = EndKnown.LIVE) -> PartitionRpo:
    return PartitionRpo("orders", partition, "orders", last, 1_000, end, known, 2_000, rpo, None if rpo is None else 500)


def test_the_summary_sums_the_rpo_and_names_the_partitions_behind() -> None:
    report = SwitchReport(Switch.FAILOVER, 1_795_000_000_000, False, False,
                          (_row(0, 9, 10, 0), _row(1, 4, 12, 7, EndKnown.LAST_KNOWN)),
                          (GroupPosition("app", "orders", 1, "orders", 3, 5, None, 7, 0),))
    assert report.rpo_records == 7 and report.rpo_ms == 500
    lines = report.render().splitlines()
    assert lines[0].startswith("failed over at 2026-") and "2 partitions, 1 fully mirrored; RPO 7 records, 0.5s" in lines[0]
    assert "the source did not answer" in lines[0] and "1 group(s), 7 records they will not see" in lines[0]
    assert [line.split()[0] for line in lines[2:3]] == ["orders-1"]
    assert "last known" in lines[2]


def test_an_unknown_end_makes_the_rpo_unknown_not_zero() -> None:
    report = SwitchReport(Switch.FAILOVER, 0, True, False, (_row(0, 9, None, None),))
    assert report.rpo_records is None
    assert "would be failed over (dry run)" in report.summary() and "RPO unknown records" in report.summary()


def test_the_document_reads_back_to_the_same_report() -> None:
    report = SwitchReport(Switch.PROMOTE, 5, False, True, (_row(0, 9, 10, 0), _row(1, -1, 3, 3)),
                          (GroupPosition("g", "orders", 0, "orders", 4, 6, 6, 0, 0),), ("orders",), True, ("a note",))
    assert SwitchReport.from_doc(report.to_doc()) == report
