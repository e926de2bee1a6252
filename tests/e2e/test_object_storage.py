"""The job with its state dir on an S3-compatible server (moto on 127.0.0.1), on the session's local Spark:
the same sink as with a local state dir, status and dump read the store, and a checkpoint Spark cannot
write is a one-line error."""

from __future__ import annotations

import time

import pytest

from streaming.kafka.admin import unique_topic_name
from tests.e2e.helpers import dump_json, read_topic, run_once, sent_view, sink_view, status_json, winners
from tests.kafka_helpers import Sent, produce

pytestmark = pytest.mark.integration

HOUR = 3_600_000
FORCE = "max.compaction.lag.ms=60000"


def test_a_state_dir_on_s3_gives_the_sink_of_the_model_across_runs(spark, bootstrap_servers, new_topic, s3_server,
                                                                    tmp_path, capsys) -> None:
    src, sink = new_topic(partitions=2), unique_topic_name("sink")
    state = s3_server.uri(s3_server.new_bucket(), "jobs/s3")
    checkpoint = ("--checkpoint-location", str(tmp_path / "checkpoint"))
    past = int(time.time() * 1000) - 2 * HOUR
    first = produce(bootstrap_servers, src, [Sent(i % 2, b"k%d" % (i % 13), b"a%d" % i, past + i) for i in range(300)])
    assert run_once(bootstrap_servers, src, sink, state, FORCE, extra=checkpoint) == 0
    second = produce(bootstrap_servers, src, [Sent(i % 2, b"k%d" % (i % 5), b"b%d" % i, past + 1000 + i)
                                              for i in range(100)])
    assert run_once(bootstrap_servers, src, sink, state, FORCE, extra=checkpoint) == 0
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
