"""The job with its state dir on a real S3 server (MinIO on 127.0.0.1), on the session's local Spark:
the same sink as with a local state dir, status and dump read the store, a checkpoint Spark cannot
write is a one-line error, and a store that dies mid-stage and comes back is waited for."""

from __future__ import annotations

import re
import time

import pytest

from streaming.kafka.admin import unique_topic_name
from streaming.runtime.moments import HOLD_ENV, REACHED, RELEASE, Moment
from tests.cli.test_first_contact import kcompact
from tests.e2e.helpers import (NO_SINK_COMPACTION, assert_sink_contract, dump_json, read_topic, run_once, sent_view, sink_caught_up,
                               sink_view, status_json, wait_for, winners)
from tests.e2e.running_job import RunningJob
from tests.kafka_helpers import Sent, produce
from tests.minio import S3Server

pytestmark = pytest.mark.integration

HOUR = 3_600_000
FORCE = "max.compaction.lag.ms=60000"
CONFIG = ("max.compaction.lag.ms=1000", "min.cleanable.dirty.ratio=0.1")
CATCH_UP_S = 30.0
WAITING = re.compile(r"WARNING .*waiting for the state store since \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC")


def test_a_state_dir_on_s3_gives_the_sink_of_the_model_across_runs(spark, bootstrap_servers, new_topic, s3_server,
                                                                    tmp_path, capsys) -> None:
    src, sink = new_topic(partitions=2), unique_topic_name("sink")
    state = s3_server.uri(s3_server.new_bucket(), "jobs/s3")
    checkpoint = ("--checkpoint-location", str(tmp_path / "checkpoint"))
    past = int(time.time() * 1000) - 2 * HOUR
    first = produce(bootstrap_servers, src, [Sent(i % 2, b"k%d" % (i % 13), b"a%d" % i, past + i) for i in range(300)])
    # an uncompacted sink (NO_SINK_COMPACTION): both runs' winners are read, the first run's superseded ones too
    assert run_once(bootstrap_servers, src, sink, state, FORCE, extra=checkpoint, sink_config=NO_SINK_COMPACTION) == 0
    second = produce(bootstrap_servers, src, [Sent(i % 2, b"k%d" % (i % 5), b"b%d" % i, past + 1000 + i)
                                              for i in range(100)])
    assert run_once(bootstrap_servers, src, sink, state, FORCE, extra=checkpoint, sink_config=NO_SINK_COMPACTION) == 0
    got = read_topic(bootstrap_servers, sink, 2)
    for p in range(2):  # each run's pass covers that run's records; later offsets win every key
        expected = winners([s for s in first if s.partition == p]) + winners([s for s in second if s.partition == p])
        assert sink_view(got[p]) == sent_view(expected), f"partition {p}"
    status = status_json(state, capsys)
    assert [p["emitted_up_to"] for p in status["partitions"]] == [max(sink_view(got[p]))[0] for p in range(2)]
    assert {r["value"] for r in dump_json(state, capsys)} >= {s.value.decode() for s in winners(
        [s for s in first + second if s.partition == 0])}


def test_a_checkpoint_spark_cannot_write_is_a_one_line_error(spark, bootstrap_servers, new_topic, s3_server,
                                                             capsys) -> None:
    src = new_topic(partitions=1)
    capsys.readouterr()
    rc = run_once(bootstrap_servers, src, unique_topic_name("sink"), s3_server.uri(s3_server.new_bucket()))
    last = capsys.readouterr().err.strip().splitlines()[-1]  # after the job's own log lines
    assert rc == 2 and last.startswith("kcompact: error: Spark has no filesystem for s3a://"), last
    assert "--checkpoint-location" in last


@pytest.mark.slow
@pytest.mark.minio
def test_the_store_killed_mid_stage_and_started_again_is_waited_for_and_caught_up(bootstrap_servers, new_topic,
                                                                                   tmp_path) -> None:
    """MinIO SIGKILLed while an append task holds its records, then started again on its data dir: the job
    waits, says since when, and every winner is in the sink within CATCH_UP_S of the store's return, with the
    sink contract held and verify clean."""
    store = S3Server(tmp_path / "minio")  # the test's own: the session's goes on for the others
    try:
        src, sink = new_topic(partitions=2), unique_topic_name("sink")
        past = int(time.time() * 1000) - 2 * HOUR
        sent = produce(bootstrap_servers, src, [Sent(i % 2, b"k%d" % (i % 40), b"a%d" % i, past + i) for i in range(400)])
        hold = tmp_path / "hold"
        hold.mkdir()
        state = store.uri(store.new_bucket(), "jobs/restart")
        with RunningJob(bootstrap_servers, src, sink, tmp_path, *CONFIG, state_dir=state,
                        extra=("--checkpoint-location", str(tmp_path / "checkpoint")),
                        env={HOLD_ENV: f"{Moment.APPEND.value}:{hold}"}) as job:
            wait_for(lambda: job.running() or (hold / REACHED).exists(), 180, "an append task held")
            store.kill()
            (hold / RELEASE).touch()
            wait_for(lambda: job.running() or WAITING.search(job.log()), 60, "the job says it waits for the store")
            store.start()
            back = time.monotonic()
            wait_for(lambda: job.running() or sink_caught_up(bootstrap_servers, sink, sent, 2), CATCH_UP_S,
                     "every winner, after the store's return", pause_s=0.2)
            print(f"caught up {time.monotonic() - back:.1f}s after the store's return")
            sent += produce(bootstrap_servers, src, [Sent(i % 2, b"k%d" % (i % 40), b"b%d" % i, past + 1000 + i)
                                                     for i in range(100)])
            wait_for(lambda: job.running() or sink_caught_up(bootstrap_servers, sink, sent, 2), 120, "every winner")
            job.stop()
            log = job.log()
        assert "the state store answers again" in log
        assert "Traceback" not in log, log[-4000:]
        assert_sink_contract(bootstrap_servers, sink, sent, 2)
        verified = kcompact("verify", "--state-dir", state)
        assert verified.returncode == 0, verified.stdout[-3000:] + verified.stderr[-3000:]
    finally:
        store.stop()
