"""Where a switch's RPO begins, from the sink's last record of the job's and the job's note of its emission: past
what the note says was committed while the sink still holds those records' offsets (the broker's cleaner removed
them, the DR site holds their keys' newer records), after the sink's last record when it was truncated."""

from __future__ import annotations

from streaming.disaster.switch import JobLog, first_unmirrored
from streaming.job.emission_note import EmissionNote
from streaming.kafka.sink.sink_progress import LastMirrored
from streaming.kafka.sink.sink_state import SinkPartitionState

NOTE = EmissionNote(emitted_up_to=9, written_up_to=9, looped_to="dr", sink_topic_id="id-1", sink_floor=0,
                    sink_reached=10)
LOG = JobLog(0, 12, None, NOTE)
FOUND = LastMirrored(source_offset=8, timestamp_ms=0, sink_offset=8)  # the job's record of offset 9 compacted away


def test_a_sink_whose_last_job_records_were_compacted_away_begins_the_rpo_after_the_note() -> None:
    assert first_unmirrored(FOUND, LOG, "dr", SinkPartitionState("id-1", 0, 14, 14)) == 10
    assert first_unmirrored(None, LOG, "dr", SinkPartitionState("id-1", 0, 14, 14)) == 10, "all of them compacted"


def test_a_sink_truncated_or_made_again_begins_the_rpo_after_what_it_shows() -> None:
    assert first_unmirrored(FOUND, LOG, "dr", SinkPartitionState("id-1", 1, 14, 14)) == 9, "records deleted"
    assert first_unmirrored(FOUND, LOG, "dr", SinkPartitionState("id-1", 0, 9, 9)) == 9, "its end cut back"
    assert first_unmirrored(FOUND, LOG, "dr", SinkPartitionState("id-2", 0, 14, 14)) == 9, "made again"
    assert first_unmirrored(FOUND, LOG, "dr") == 9, "the sink's state not read"
