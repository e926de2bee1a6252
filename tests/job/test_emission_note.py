"""The log's note of its emission: where a partition resumes when the sink's last record of the job's is read,
past the records the note says were left out as looped after it, and nowhere past what the sink shows when it
holds less than the job wrote, or the note was made for another sink cluster; and, while the sink topic holds
every offset from the job's last record there on, no lower one than the note (the broker compacted it away)."""

from __future__ import annotations

from streaming.job.emission_note import MARK, EmissionNote, emission_note
from streaming.log import LogConfig, PartitionLog, make_record
from streaming.log.storage import write_json
from streaming.state.layout import emitted_file

NOTE = EmissionNote(emitted_up_to=90, written_up_to=40, looped_to="cluster-b")


def test_a_sink_that_shows_the_last_record_written_resumes_past_the_looped_ones() -> None:
    assert NOTE.resumes_after(40, "cluster-b") == 90
    assert NOTE.resumes_after(60, "cluster-b") == 90, "records up to 90 after any of them were left out"


def test_a_sink_that_holds_less_or_more_resumes_after_what_it_shows() -> None:
    assert NOTE.resumes_after(39, "cluster-b") == 39, "emptied or truncated: filled again from there"
    assert NOTE.resumes_after(-1, "cluster-b") == -1
    assert NOTE.resumes_after(95, "cluster-b") == 95, "written further than noted (a note lost in a crash)"


def test_a_note_for_another_sink_cluster_passes_nothing() -> None:
    assert NOTE.resumes_after(40, "cluster-c") == 40
    assert NOTE.written_for(90, "cluster-c") is None


def test_the_driver_trusted_progress_keeps_the_last_record_written_when_the_note_agrees() -> None:
    assert NOTE.written_for(90, "cluster-b") == 40
    assert NOTE.written_for(95, "cluster-b") is None, "a later stage the note missed: nothing known left out"


def test_a_note_from_before_records_were_left_out_has_none() -> None:
    old = EmissionNote.from_doc({"emitted_up_to": 12, "at_ms": 1})
    assert old == EmissionNote(12, 12, None) and old.resumes_after(12, "cluster-b") == 12


def test_a_sink_that_still_holds_the_jobs_last_record_was_compacted_not_truncated() -> None:
    note = EmissionNote(90, 90, "cluster-b", sink_topic_id="id-1", sink_floor=500, sink_reached=540)
    assert note.kept_by("id-1", 0, 540) and note.kept_by("id-1", 500, 900), "start not past, end not below"
    assert not note.kept_by("id-1", 501, 900), "records deleted past it (DeleteRecords, retention): truncated"
    assert not note.kept_by("id-1", 0, 539), "its end cut back (an unclean leader election): truncated"
    assert not note.kept_by("id-2", 0, 900), "another topic of the same name: made again"
    assert not EmissionNote(90, 90, "cluster-b", "id-1").kept_by("id-1", 0, 900), "no floor known: nothing kept"
    assert EmissionNote(90, 90, "cluster-b", "id-1", 500).kept_by("id-1", 0, 501), "no end known: past the floor"
    assert not EmissionNote(90, 90, "cluster-b", "id-1", 500).kept_by("id-1", 0, 500)


def test_a_note_from_before_it_named_its_sink_topic_keeps_nothing() -> None:
    old = EmissionNote.from_doc({"emitted_up_to": 12, "written_up_to": 12, "looped_to": "cluster-b", "at_ms": 1})
    assert (old.sink_topic_id, old.sink_floor) == (None, None) and not old.kept_by("id-1", 0, 900)


def test_the_note_is_read_from_the_logs_manifest_or_else_from_an_older_kcompacts_file(tmp_path) -> None:
    log = PartitionLog(str(tmp_path), LogConfig(fsync=False), jitter_seed="t-0")
    log.append([make_record(0, b"k", b"v", 0)])
    assert emission_note(log) is None
    write_json(log.storage, emitted_file(log.dir), {"emitted_up_to": 3, "at_ms": 1})
    assert emission_note(log) == EmissionNote(3, 3, None), "a log an older kcompact last committed"
    log.note([], {MARK: {"emitted_up_to": 0, "written_up_to": 0, "looped_to": "cluster-b", "at_ms": 2}})
    assert emission_note(PartitionLog(str(tmp_path), LogConfig(fsync=False))) == EmissionNote(0, 0, "cluster-b")
