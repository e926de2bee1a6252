"""The erase audit's notes lost in a crash: tombstones the sink committed past a log's noted range are noted at
the next emission with the sink offsets the sink holds them at, every partition's looked up together."""

from __future__ import annotations

import time

import pytest

from streaming.cleaner import CompactionConfig
from streaming.configuration.subscription import Subscribe
from streaming.job.erase_audit import EMITTED_THROUGH, recover_lost_notes
from streaming.job.spec import JobMapping, JobSpec, TopicPlan
from streaming.kafka.admin import create_topic, unique_topic_name
from streaming.kafka.headers.offset_header import OFFSET_HEADER, encode
from streaming.kafka.sink.task_emitter import SinkPartition
from streaming.log import batch_from_records, make_record
from streaming.partition_id import PartitionId
from streaming.state.layout import LogDir, log_dir, open_partition_log
from streaming.state.stores import open_state_dir
from tests.kafka_helpers import Sent, produce

pytestmark = pytest.mark.integration

SOURCE = "accounts"
CONFIG = CompactionConfig()
TOMBSTONES = {0: (2, 5, 8), 1: (1, 6, 9)}  # source offsets of the tombstones in each partition's log


def _logs_noted_up_to_3(spec: JobSpec, now: int) -> list:
    state = open_state_dir(spec.state_dir)
    logs = []
    for p, tombstones in TOMBSTONES.items():
        plog = open_partition_log(state, LogDir(PartitionId(SOURCE, p), log_dir(state, SOURCE, p)), CONFIG.log_config)
        plog.append(batch_from_records([make_record(o, b"k%d" % o, None if o in tombstones else b"v", now - 1000 + o)
                                        for o in range(10)]), now)
        plog.note([], {EMITTED_THROUGH: 3})  # noted up to 3; the crash lost the note of 4 to 9
        logs.append(plog)
    return logs


def test_tombstones_the_sink_holds_past_the_noted_range_are_noted_with_their_sink_offsets(bootstrap_servers,
                                                                                         tmp_path) -> None:
    sink = create_topic(bootstrap_servers, unique_topic_name("audit"), 2, {"cleanup.policy": "delete"})
    spec = JobSpec(JobMapping(bootstrap_servers, Subscribe((SOURCE,)), bootstrap_servers, "{topic}.s"),
                   str(tmp_path), {SOURCE: TopicPlan(SOURCE, sink, CONFIG, 2)})
    now = int(time.time() * 1000)
    logs = _logs_noted_up_to_3(spec, now)
    # the sink as the lost stage left it: partition 0 got every record from 4 on, partition 1 only the odd ones
    emitted = {0: range(4, 10), 1: range(5, 10, 2)}
    sent = produce(bootstrap_servers, sink, [Sent(p, b"k%d" % o, None if o in TOMBSTONES[p] else b"v", now,
                                                  [(OFFSET_HEADER, encode(o))])
                                             for p, offsets in emitted.items() for o in offsets])
    sink_offset = {(s.partition, int(s.headers[0][1])): s.offset for s in sent}

    failed = recover_lost_notes({p: (plog, SinkPartition(PartitionId(sink, p), emitted_up_to=9))
                                 for p, plog in enumerate(logs)}, spec)
    assert failed == {}

    for p, plog in enumerate(logs):
        events = [e for e in plog.journal() if e.get("e") == "emitted"]
        want = [(o, sink_offset.get((p, o))) for o in TOMBSTONES[p] if o > 3]
        assert [(e["offset"], e["sink_offset"]) for e in events] == want, p
        assert all(e["recovered"] for e in events)
        assert plog.journal_marks[EMITTED_THROUGH] == 9
    assert (1, 6) not in sink_offset and sink_offset.get((1, 9)) is not None, "6 never reached the sink, 9 did"


def test_a_sink_that_cannot_be_read_leaves_every_partition_behind_unnoted_and_named(bootstrap_servers,
                                                                                   tmp_path) -> None:
    """Each partition behind is returned with the failure, so it emits nothing this stage: its next note would
    otherwise mark the range noted without its events."""
    spec = JobSpec(JobMapping(bootstrap_servers, Subscribe((SOURCE,)), bootstrap_servers, "{topic}.s"),
                   str(tmp_path), {SOURCE: TopicPlan(SOURCE, "no-such-sink", CONFIG, 2)})
    logs = _logs_noted_up_to_3(spec, int(time.time() * 1000))
    failed = recover_lost_notes({p: (plog, SinkPartition(PartitionId(unique_topic_name("no-such-sink"), p), 9))
                                 for p, plog in enumerate(logs)}, spec)
    assert set(failed) == {0, 1}
    for plog in logs:
        assert plog.journal_marks[EMITTED_THROUGH] == 3
        assert not [e for e in plog.journal() if e.get("e") == "emitted"]
