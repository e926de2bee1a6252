"""Whether the job believes its own note of what a sink partition holds is decided by the sink itself, its
topic's id and its end: a sink deleted and made again while the job runs (its source idle, and with new
records) or while it is down and someone else wrote it back to the old end offset, is filled again with every
winner. And a transaction another writer leaves open on a sink partition is named, shown by status, the
metrics and verify, never aborted, and the partition's emission waits for its writer to end it."""

from __future__ import annotations

import json
import time
import uuid

import pytest
from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from streaming.cli.main import main
from streaming.kafka.admin import create_topic, unique_topic_name
from streaming.partition_id import PartitionId
from streaming.kafka.sink.sink_state import read_states
from tests.e2e.helpers import (NO_SINK_COMPACTION, assert_sink_contract, read_topic, run_once,
                               sink_caught_up, status_json, wait_for)
from tests.e2e.running_job import RunningJob
from tests.kafka_helpers import Sent, produce

pytestmark = pytest.mark.integration

HOUR = 3_600_000
CONFIG = ("max.compaction.lag.ms=1000", "min.cleanable.dirty.ratio=0.1")
SINK_CONFIG = {"cleanup.policy": "compact", "segment.ms": "500", "min.cleanable.dirty.ratio": "0.01"}  # COMPACTED_SINK


def _changes(partitions: int, count: int, start: int = 0) -> list[Sent]:
    past = int(time.time() * 1000) - 2 * HOUR
    return [Sent(i % partitions, b"k%d" % (i % 40), b"v%d" % i, past + i) for i in range(start, start + count)]


def _made_again(bootstrap: str, topic: str, partitions: int) -> None:
    """The topic deleted and made anew (a new topic id), empty."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.delete_topics([topic])[topic].result(30)

    def made() -> bool:
        try:
            create_topic(bootstrap, topic, partitions, SINK_CONFIG)
        except RuntimeError:  # its deletion is not done yet
            return False
        return True
    wait_for(made, 60, f"{topic} made again")


def test_a_sink_made_again_while_the_job_runs_is_filled_again_idle_or_not(bootstrap_servers, new_topic,
                                                                          tmp_path) -> None:
    src, sink = new_topic(partitions=2), unique_topic_name("sink")
    sent = produce(bootstrap_servers, src, _changes(2, 200))
    with RunningJob(bootstrap_servers, src, sink, tmp_path, *CONFIG) as job:
        wait_for(lambda: job.running() or sink_caught_up(bootstrap_servers, sink, sent, 2), 180, "every winner")
        _made_again(bootstrap_servers, sink, 2)  # the source stays idle
        wait_for(lambda: job.running() or sink_caught_up(bootstrap_servers, sink, sent, 2), 60,
                 "every winner again, with no new record at the source")
        _made_again(bootstrap_servers, sink, 2)
        sent += produce(bootstrap_servers, src, _changes(2, 60, 200))
        wait_for(lambda: job.running() or sink_caught_up(bootstrap_servers, sink, sent, 2), 60,
                 "every winner again, with new records")
        job.stop()
    assert_sink_contract(bootstrap_servers, sink, sent, 2)


def test_a_sink_made_again_while_the_job_is_down_and_written_to_its_old_end_is_filled_again(
        spark, bootstrap_servers, new_topic, tmp_path) -> None:
    src, sink = new_topic(), unique_topic_name("sink")
    sent = produce(bootstrap_servers, src, _changes(1, 100))
    assert run_once(bootstrap_servers, src, sink, str(tmp_path), *CONFIG, extra=("--drain",)) == 0
    end = len(read_topic(bootstrap_servers, sink, 1)[0]) + 1  # the winners and their commit's marker
    _made_again(bootstrap_servers, sink, 1)
    foreign = Producer({"bootstrap.servers": bootstrap_servers})
    for i in range(end):
        foreign.produce(sink, key=b"someone", value=b"else-%d" % i, partition=0)
    foreign.flush(30)
    admin = AdminClient({"bootstrap.servers": bootstrap_servers})
    assert read_states(admin, [PartitionId(sink, 0)], 30)[PartitionId(sink, 0)].high == end, "the old end again"
    assert run_once(bootstrap_servers, src, sink, str(tmp_path), *CONFIG, extra=("--drain",)) == 0
    got = read_topic(bootstrap_servers, sink, 1)[0]
    mine = {r["key"]: r["source_offset"] for r in got if r["key"] != b"someone"}
    assert mine == {s.key: s.offset for s in sent if s.offset == max(t.offset for t in sent if t.key == s.key)}


def test_a_sink_emptied_by_deleting_its_records_is_filled_again(spark, bootstrap_servers, new_topic, tmp_path) -> None:
    """DeleteRecords to its end leaves a sink partition's topic id and end as the job left them: only its log
    start says it was emptied (docs/sink.md: a sink emptied is filled again, idle source or not). Kafka refuses
    DeleteRecords on a topic it only compacts: the sink is one that deletes, as retention would."""
    src, sink = new_topic(), unique_topic_name("sink")
    sent = produce(bootstrap_servers, src, _changes(1, 100))
    assert run_once(bootstrap_servers, src, sink, str(tmp_path), *CONFIG, extra=("--drain",),
                    sink_config=NO_SINK_COMPACTION) == 0
    admin = AdminClient({"bootstrap.servers": bootstrap_servers})
    end = read_states(admin, [PartitionId(sink, 0)], 30)[PartitionId(sink, 0)].high
    admin.delete_records([TopicPartition(sink, 0, end)])[TopicPartition(sink, 0, end)].result(30)
    assert read_topic(bootstrap_servers, sink, 1)[0] == [], "emptied"
    assert run_once(bootstrap_servers, src, sink, str(tmp_path), *CONFIG, extra=("--drain",),
                    sink_config=NO_SINK_COMPACTION) == 0
    assert sink_caught_up(bootstrap_servers, sink, sent, 1), "every winner again, the source idle"
    assert_sink_contract(bootstrap_servers, sink, sent, 1)


def _compacted_away(bootstrap: str, sink: str, source_offset: int) -> None:
    """Wait until the broker's cleaner has removed the job's record of ``source_offset`` from partition 0. A
    segment rolls only when a record comes after segment.ms, and the active one is never cleaned: a filler
    record of another key goes in now and then."""
    filler = Producer({"bootstrap.servers": bootstrap})

    def gone() -> bool:
        filler.produce(sink, key=b"filler", value=b"roll", partition=0)
        filler.flush(30)
        return all(r["source_offset"] != source_offset for r in read_topic(bootstrap, sink, 1)[0])
    wait_for(gone, 120, f"the broker's cleaner removes source offset {source_offset} from {sink}-0", pause_s=1)


def test_a_sink_whose_last_record_of_the_jobs_was_compacted_away_resumes_after_it(spark, bootstrap_servers, new_topic,
                                                                                 tmp_path) -> None:
    """Another producer writes a key the job wrote last (after a failover, in two-way mirroring), and the broker
    compacts the job's record away: the sink's last record of the job's is then an older one. The job's note of
    what it committed to this sink (the same topic, nothing of it truncated) keeps it from sending that key's
    old value again over the newer one."""
    src, sink = new_topic(), unique_topic_name("sink")
    past = int(time.time() * 1000) - 2 * HOUR
    sent = produce(bootstrap_servers, src, [Sent(0, b"k%d" % i, b"v%d" % i, past + i) for i in range(10)])
    assert run_once(bootstrap_servers, src, sink, str(tmp_path), *CONFIG, extra=("--drain",)) == 0
    theirs = Producer({"bootstrap.servers": bootstrap_servers})
    theirs.produce(sink, key=b"k9", value=b"newer, theirs", partition=0)
    theirs.flush(30)
    _compacted_away(bootstrap_servers, sink, 9)
    sent += produce(bootstrap_servers, src, [Sent(0, b"k10", b"v10", past + 10)])
    assert run_once(bootstrap_servers, src, sink, str(tmp_path), *CONFIG, extra=("--drain",)) == 0
    got = read_topic(bootstrap_servers, sink, 1)[0]
    offsets = [r["source_offset"] for r in got if r["source_offset"] is not None]
    assert offsets == sorted(set(offsets)) and 9 not in offsets, f"a source offset sent again: {offsets}"
    assert 10 in offsets, "what came after is emitted"
    last = {r["key"]: r["value"] for r in got}
    assert last[b"k9"] == b"newer, theirs", "the key went back to the job's older value"


def test_another_writers_open_transaction_holds_its_partition_until_it_ends(spark, bootstrap_servers, new_topic,
                                                                            tmp_path, capsys) -> None:
    """Tried as a new user did: another producer holds a transaction open on the sink partition while the job
    goes on. The next run names it as another writer's, aborts nothing, advises no abort, and holds the
    partition, shown by status, the metrics and verify; once its writer commits, the next run emits."""
    src, sink = new_topic(partitions=2), unique_topic_name("sink")
    state_dir = str(tmp_path / "state")
    first = produce(bootstrap_servers, src, [Sent(p, b"a%d" % i, b"v", 1_000 + i) for i in range(50) for p in (0, 1)])
    assert run_once(bootstrap_servers, src, sink, state_dir, *CONFIG, extra=("--drain",)) == 0
    other = Producer({"bootstrap.servers": bootstrap_servers, "transactional.id": f"someone-else-{uuid.uuid4().hex}",
                      "transaction.timeout.ms": 900_000})
    other.init_transactions(30)
    other.begin_transaction()
    other.produce(sink, key=b"theirs", value=b"open", partition=0)
    other.flush(30)
    second = produce(bootstrap_servers, src, [Sent(p, b"b%d" % i, b"w", 2_000 + i) for i in range(30) for p in (0, 1)])
    capsys.readouterr()
    assert run_once(bootstrap_servers, src, sink, state_dir, *CONFIG, extra=("--drain",)) == 1
    said = capsys.readouterr().err
    errors = [line for line in said.splitlines() if " ERROR " in line and "another writer" in line]
    assert len(errors) == 1 and f"another writer's transaction is open on {sink}-0 at sink offset 51 since " in errors[0]
    assert "abort --" not in said, "no abort of someone else's transaction is advised"
    admin = AdminClient({"bootstrap.servers": bootstrap_servers})
    assert read_states(admin, [PartitionId(sink, 0)], 30)[PartitionId(sink, 0)].stable == 51, "it is still open"

    status = status_json(state_dir, capsys)
    states = {p["partition"]: p for p in status["partitions"]}
    assert states[0]["state"] == "HELD" and "sink offset 51" in states[0]["held_by"] and states[1]["state"] == "ok"
    metrics = json.loads((tmp_path / "state" / "metrics.json").read_text())
    held = {p["partition"]: p["held_seconds"] for p in metrics["partitions"]}
    assert held[0] is not None and held[0] >= 0 and held[1] is None
    capsys.readouterr()
    verified = main(["verify", "--state-dir", state_dir])
    out = capsys.readouterr().out
    assert verified != 0 and "a transaction has been open at sink offset 51" in out, out

    other.commit_transaction(30)
    assert run_once(bootstrap_servers, src, sink, state_dir, *CONFIG, extra=("--drain",)) == 0
    assert status_json(state_dir, capsys)["partitions"][0]["state"] == "ok"
    got = read_topic(bootstrap_servers, sink, 2)
    for p in (0, 1):
        offsets = [r["source_offset"] for r in got[p] if r["key"] != b"theirs"]
        assert offsets == sorted(s.offset for s in first + second if s.partition == p), f"partition {p}"
