"""Faults an operator will meet: damaged segments, a full state disk, a broker that goes away and comes back.

Each run goes through the CLI against the real broker; the sink is compared with the reference model.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from streaming.log import LogConfig, PartitionLog
from streaming.log.manifest import load_newest
from streaming.log.segment import SegmentMeta, segment_name
from streaming.runtime.moments import HOLD_ENV, HOLDER, REACHED, Moment
from streaming.state.stores import open_state_dir
from streaming.state.layout import log_dir
from streaming.kafka.admin import create_topic, unique_topic_name
from tests.e2e.helpers import (
    COMPACTED_SINK,
    NO_SINK_COMPACTION,
    JobProgress,
    assert_sink_contract,
    offsets_diff,
    read_topic,
    run_once,
    sent_view,
    sink_caught_up,
    sink_view,
    status_json,
    wait_for,
    winners,
)
from tests.crashing_broker import CrashingBroker
from tests.e2e.running_job import RunningJob
from tests.kafka_helpers import ORIGINS, ChangeProducer, Sent, log_contents, produce

pytestmark = pytest.mark.integration

HOUR = 3_600_000
FORCE = "max.compaction.lag.ms=60000"


def _past() -> int:
    return int(time.time() * 1000) - 2 * HOUR


def _sealed_segment(state_dir: str, topic: str, partition: int) -> tuple[str, SegmentMeta]:
    """An object of the first sealed segment holding records, with the segment's description."""
    plog = PartitionLog(log_dir(open_state_dir(state_dir), topic, partition), LogConfig(fsync=False))
    meta = next(m for m in plog.segments[:-1] if m.record_count)
    return plog.object_path(meta.chunks[-1].name), meta


def _damage(path: str, how: str) -> None:
    data = bytearray(Path(path).read_bytes())
    if how == "truncate":
        data = data[:-25]
    else:
        at = data.index(b"value-") + 6
        data[at] ^= 0x01  # inside a value: still decodes, only the checksum can tell
    with open(path, "wb") as f:
        f.write(bytes(data))


@pytest.mark.parametrize("how", ["truncate", "flip"])
def test_damaged_segment_makes_its_partition_uncleanable_and_the_others_go_on(
        spark, bootstrap_servers, new_topic, tmp_path, capsys, how: str) -> None:
    src, sink = new_topic(partitions=2), unique_topic_name("sink")
    state = str(tmp_path)
    past = _past()
    first = produce(bootstrap_servers, src, [Sent(i % 2, b"k%d" % (i % 6), b"value-%d" % i, past + i)
                                             for i in range(40)])
    # an uncompacted sink (NO_SINK_COMPACTION): every record emitted by both runs is compared, superseded ones too
    assert run_once(bootstrap_servers, src, sink, state, FORCE, sink_config=NO_SINK_COMPACTION) == 0
    path, meta = _sealed_segment(state, src, 0)
    _damage(path, how)

    second = produce(bootstrap_servers, src, [Sent(i % 2, b"k%d" % (i % 9), b"value-x%d" % i, past + 100 + i)
                                              for i in range(30)])
    assert run_once(bootstrap_servers, src, sink, state, FORCE, sink_config=NO_SINK_COMPACTION) == 1, \
        "an uncleanable partition fails --once"

    got = read_topic(bootstrap_servers, sink, 2)
    healthy_first = [s for s in first if s.partition == 1]
    healthy_second = [s for s in second if s.partition == 1]
    new = [s for s in winners(healthy_first + healthy_second) if s.offset >= healthy_second[0].offset]
    assert sink_view(got[1]) == sent_view(winners(healthy_first) + new), "the healthy partition went on"
    assert sink_view(got[0]) == sent_view(winners([s for s in first if s.partition == 0])), \
        "nothing of the damaged partition was emitted after the damage"

    status = status_json(state, capsys)
    by_partition = {p["partition"]: p for p in status["partitions"]}
    damaged = by_partition[0]
    assert damaged["uncleanable"] and segment_name(meta.base_offset) in damaged["uncleanable_error"]
    if how == "truncate":  # found on open, from the object's size alone
        assert list(damaged["damaged_segments"]) == [segment_name(meta.base_offset)]
    else:  # same size: found by the checksum when the cleaner read it
        assert "checksum mismatch" in damaged["uncleanable_error"] and not damaged["damaged_segments"]
    assert not by_partition[1]["uncleanable"]
    assert status["metrics"]["uncleanable-partitions-count"] == 1

    tail = log_contents(state, src, 0, from_offset=meta.next_offset)
    assert [o for o, *_ in tail][-15:] == [s.offset for s in second if s.partition == 0], \
        "the damaged partition's log still took every new record"


@pytest.fixture
def small_tmpfs(tmp_path):
    """A 1 MiB tmpfs as the state dir (root only), grown by calling the returned function."""
    mount = tmp_path / "state"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({done.stderr.decode().strip()}); "
                    f"tests/log/test_disk_full.py covers a full disk under the log")

    def grow() -> None:
        subprocess.run(["mount", "-o", "remount,size=64m", str(mount)], check=True)

    try:
        yield str(mount), grow
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def test_full_state_disk_stops_the_job_with_a_clear_error_and_loses_nothing(
        spark, bootstrap_servers, new_topic, small_tmpfs, capsys) -> None:
    state, grow = small_tmpfs
    src, sink = new_topic(partitions=2), unique_topic_name("sink")
    past = _past()
    sent = produce(bootstrap_servers, src, [Sent(i % 2, b"k%d" % (i % 300), b"value-%d-" % i + b"x" * 1000,
                                                 past + i) for i in range(3000)])
    capsys.readouterr()
    # micro-batches of 300 records: the first ones fit, so the disk fills up partway through the input
    assert run_once(bootstrap_servers, src, sink, state, FORCE, extra=("--max-offsets-per-trigger", "300")) == 2
    err = capsys.readouterr().err
    assert f"kcompact: error: the state dir {state} is full (No space left on device)" in err, err[-2000:]

    grow()
    by_offset = {(s.partition, s.offset): s for s in sent}
    stored_before_full = 0
    for p in range(2):
        plog = PartitionLog(log_dir(open_state_dir(state), src, p), LogConfig(fsync=False))
        stored = [(r["offset"], r["key"], r["value"]) for r in plog.read()]
        # what the log holds is a cleaned prefix of the partition: records below its end, each intact
        assert 0 <= plog.log_end_offset <= sum(s.partition == p for s in sent)
        assert [o for o, *_ in stored] == sorted({o for o, *_ in stored}), "offsets in order, none twice"
        assert all(o < plog.log_end_offset and (k, v) == (by_offset[(p, o)].key, by_offset[(p, o)].value)
                   for o, k, v in stored), "nothing torn"
        stored_before_full += plog.log_end_offset
    assert 0 < stored_before_full < len(sent), "the disk filled up partway through the input"
    assert run_once(bootstrap_servers, src, sink, state, FORCE) == 0
    # the micro-batches before the disk filled up emitted their passes' winners: the sink holds those and then
    # every key's final winner, each record once
    assert_sink_contract(bootstrap_servers, sink, sent, 2)


def test_broker_crashes_during_ingest_and_emit_are_ridden_out(crashing_broker, tmp_path) -> None:
    """A broker of its own (the session's must stay up), killed with SIGKILL and started again on the same
    ports and data while a producer keeps writing and the job ingests, cleans and emits: the job keeps
    running, and the sink ends up exactly as if nothing had happened. Always a local Apache Kafka: an
    external cluster or a container cannot be crashed from here."""
    bootstrap = crashing_broker.bootstrap_servers
    src, sink = create_topic(bootstrap, unique_topic_name("bounce"), 2), unique_topic_name("sink")
    state = str(tmp_path / "state")
    command = [sys.executable, "-m", "streaming", "--log-level", "INFO", "run", "--bootstrap-servers", bootstrap,
               "--source-topic", src, "--sink-topic", sink, "--state-dir", state,
               "--config", "max.compaction.lag.ms=1000", "--config", "min.cleanable.dirty.ratio=0.1",
               "--trigger-interval", "0.5", "--max-offsets-per-trigger", "4000", *COMPACTED_SINK]
    with open(tmp_path / "job.log", "w") as job_log, \
            ChangeProducer(bootstrap, src, 2, keys=500, batch=500, pause_s=0.2, timeout_s=180) as producer:
        job = subprocess.Popen(command, stdout=job_log, stderr=subprocess.STDOUT)

        def progress_beyond(before: JobProgress) -> JobProgress | None:
            producer.check()
            assert job.poll() is None, (tmp_path / "job.log").read_text()[-4000:]
            now = JobProgress.of(state)
            return now if now.beyond(before) else None

        try:
            mark = JobProgress(0, 0)
            for down_s in (3.0, 45.0, 4.0):
                mark = wait_for(lambda mark=mark: progress_beyond(mark), 180, "the job ingests and emits (again, after the "
                                                                     "broker came back)")
                crashing_broker.crash()
                time.sleep(down_s)  # the outage
                crashing_broker.up()
            wait_for(lambda: progress_beyond(mark), 180, "the job resumed after the last crash")
            sent = producer.stop()
            time.sleep(1.5)  # every record older than max.compaction.lag.ms
            wait_for(lambda: sink_caught_up(bootstrap, sink, sent, 2), 180, "every winner in the sink")
            job.send_signal(signal.SIGTERM)
            assert job.wait(120) == 0, (tmp_path / "job.log").read_text()[-4000:]
        finally:
            if job.poll() is None:
                job.kill()
                job.wait()
    assert_sink_contract(bootstrap, sink, sent, 2)


def _in_thread(fn) -> tuple[threading.Thread, dict]:
    out: dict = {}

    def run() -> None:
        try:
            out["result"] = fn()
        except BaseException as exc:  # noqa: BLE001 (handed to the test)
            out["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, out


def test_partition_read_waits_out_a_broker_crash(crashing_broker) -> None:
    from streaming.spark.source.kafka_source import read_partition
    from streaming.spark.source.options import KafkaSourceOptions

    bs = crashing_broker.bootstrap_servers
    topic = create_topic(bs, unique_topic_name("read-bounce"), 1, {"retention.ms": "-1"})  # old timestamps
    sent = produce(bs, topic, [Sent(0, b"k%d" % i, b"v" * 200, 1_000 + i) for i in range(60_000)])
    options = dataclasses.replace(KafkaSourceOptions.parse({"kafka.bootstrap.servers": bs, "subscribe": topic}),
                                  records_per_batch=1000)
    batches: list = []

    def read() -> int:
        batches.extend(read_partition(options, topic, 0, 0, len(sent)))
        return sum(b.num_rows for b in batches)

    crashing_broker.crash()  # the read starts while the broker is away, and must wait for it
    thread, out = _in_thread(read)
    time.sleep(5)
    assert thread.is_alive() and "error" not in out, out.get("error")
    crashing_broker.up()
    thread.join(180)
    assert "error" not in out, out.get("error")
    assert out["result"] == len(sent)
    offsets = [o for b in batches for o in b.column("offset").to_pylist()]
    want = list(range(len(sent)))
    assert offsets == want, f"every record once, in order, across the outage: {offsets_diff(offsets, want)}"


def _emit_across_a_crash(broker: CrashingBroker, hold_at: int):
    """Emits 100k records in a thread, holding them back at source offset ``hold_at``, once all before it
    are acknowledged, until the broker has been killed; starts the broker again 5 s later."""
    from streaming.log import batch_from_records, make_record
    from streaming.kafka.sink.task_emitter import SinkPartition, TaskEmitter
    from streaming.partition_id import PartitionId

    sink = create_topic(broker.bootstrap_servers, unique_topic_name("emit-crash"), 1,
                        {"retention.ms": "-1"})  # the records' timestamps are from 1970
    records = [make_record(o, b"k%d" % o, b"v" * 200, 1_000 + o) for o in range(100_000)]
    emitter = TaskEmitter(broker.bootstrap_servers, f"kcompact-{sink}-0", origins=ORIGINS)
    held, crashed = threading.Event(), threading.Event()

    def held_back():  # as the log hands records to the emitter: batches, the hold between two of them
        yield batch_from_records(records[:hold_at])
        emitter.producer.flush(60)  # everything before the hold is at the broker
        held.set()
        crashed.wait(120)
        yield batch_from_records(records[hold_at:])

    thread, out = _in_thread(lambda: emitter.emit([(SinkPartition(PartitionId(sink, 0), -1), held_back())]))
    assert held.wait(120), out
    broker.crash()
    crashed.set()
    time.sleep(5)
    assert thread.is_alive(), "the emission waits for the broker"
    broker.up()
    thread.join(300)
    return sink, records, emitter, out


@pytest.mark.parametrize("where", ["inside a transaction", "between transactions"])
def test_emission_across_a_broker_crash_is_exactly_once(crashing_broker, where: str, caplog, monkeypatch) -> None:
    """The broker is killed with SIGKILL while a transaction is open (Kafka keeps it in
    __transaction_state and the producer commits it whole after the restart), or between two: every
    record reaches the sink exactly once, and a new emitter reads that progress back from the sink. While
    the broker is away the emitter says why it waits."""
    from streaming.kafka.sink import task_emitter as emitter_module
    from streaming.kafka.sink.sink_progress import committed_progress
    from streaming.kafka.sink.task_emitter import FIRST_TRANSACTION_RECORDS
    from streaming.partition_id import PartitionId

    monkeypatch.setattr(emitter_module, "TRY_S", 1.0)  # the 5 s outage then holds several tries
    caplog.set_level(logging.WARNING, logger="streaming.kafka.failures")
    hold_at = FIRST_TRANSACTION_RECORDS + 10_000 if where == "inside a transaction" else FIRST_TRANSACTION_RECORDS
    sink, records, emitter, out = _emit_across_a_crash(crashing_broker, hold_at)
    assert "error" not in out, out["error"]
    waits = [r.getMessage() for r in caplog.records]
    assert any(re.match(rf"waiting for the sink cluster: (acknowledgements|the commit) of kcompact-\S+ \({sink}-0", w)
               for w in waits), waits
    assert out["result"] == len(records)
    emitter.close()
    bs = crashing_broker.bootstrap_servers
    recovered = committed_progress({"bootstrap.servers": bs}, [PartitionId(sink, 0)])[PartitionId(sink, 0)]
    assert recovered == len(records) - 1, "progress recovered from the sink"
    got = [r["source_offset"] for r in read_topic(bs, sink, 1)[0]]
    want = list(range(len(records)))
    assert got == want, f"no record lost, none twice: {offsets_diff(got, want)}"


def test_a_source_planner_that_dies_restarts_the_query_from_its_checkpoint(bootstrap_servers, new_topic,
                                                                          tmp_path) -> None:
    """The process that plans the source's offsets can die under the job (librdkafka crashed in it on a 2-core
    CI machine as a topic was being created): the query starts again from its checkpoint, a new planner with it,
    and nothing is lost or doubled."""
    src, sink = new_topic(partitions=2), unique_topic_name("sink")
    now = int(time.time() * 1000)
    sent = produce(bootstrap_servers, src, [Sent(i % 2, b"k%d" % (i % 30), b"v%d" % i, now + i) for i in range(200)])
    with RunningJob(bootstrap_servers, src, sink, tmp_path, "max.compaction.lag.ms=1000", trigger_interval_s=1) as job:
        wait_for(lambda: job.running() or sink_caught_up(bootstrap_servers, sink, sent, 2), 180, "every winner")
        planner = wait_for(lambda: job.running() or job.source_planner(), 30, "the source's planner")
        os.kill(planner, signal.SIGKILL)
        sent += produce(bootstrap_servers, src, [Sent(i % 2, b"k%d" % (i % 30), b"w%d" % i, now + 1000 + i)
                                                 for i in range(100)])
        wait_for(lambda: job.running() or sink_caught_up(bootstrap_servers, sink, sent, 2), 120,
                 "the winners produced after the planner died")
        assert job.source_planner() not in (None, planner), "a new planner plans the query"
        job.stop()
    assert "ended under the query (the planner of the source's offsets" in job.log(), job.log()[-3000:]
    assert_sink_contract(bootstrap_servers, sink, sent, 2)


def test_an_append_tasks_worker_that_dies_restarts_the_query_and_the_batch_is_read_again(bootstrap_servers, new_topic,
                                                                                        tmp_path) -> None:
    """The Python worker of a micro-batch's task dies mid-append (SIGKILL at the append's named moment, as a crash
    in a native library would end it). Spark on local cores does not try a task again: the query fails. The job
    starts it again from its checkpoint, the batch is read again and appended idempotently."""
    src, sink = new_topic(partitions=2), unique_topic_name("sink")
    now = int(time.time() * 1000)
    sent = produce(bootstrap_servers, src, [Sent(i % 2, b"k%d" % (i % 30), b"v%d" % i, now + i) for i in range(200)])
    hold = tmp_path / "hold"
    hold.mkdir()
    with RunningJob(bootstrap_servers, src, sink, tmp_path, "max.compaction.lag.ms=1000", trigger_interval_s=1,
                    env={HOLD_ENV: f"{Moment.APPEND.value}:{hold}"}) as job:
        wait_for(lambda: job.running() or (hold / REACHED).exists(), 180, "an append task held")
        other = 1 - int((hold / REACHED).read_text().rsplit("-", 1)[1])
        state = open_state_dir(job.state_dir)
        wait_for(lambda: job.running() or load_newest(state.storage, log_dir(state, src, other)).manifest, 60,
                 "the batch's other task appended")
        os.kill(int((hold / HOLDER).read_text()), signal.SIGKILL)
        wait_for(lambda: job.running() or sink_caught_up(bootstrap_servers, sink, sent, 2), 120,
                 "every winner, the batch read again")
        job.stop()
    assert "ended under the query (a task's worker" in job.log(), job.log()[-3000:]
    assert re.search(r"batch \d+: 2 partitions, \d+ records appended, [1-9]\d* replayed", job.log()), \
        "the other task's records were read again, and skipped"
    assert_sink_contract(bootstrap_servers, sink, sent, 2)
