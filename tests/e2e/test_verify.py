"""kcompact verify against a real broker: a sink the job wrote passes, and a sink changed by hand fails,
naming the key."""

from __future__ import annotations

import json
import re
import time

import pytest
from confluent_kafka import Producer

from streaming.cli.main import main
from streaming.kafka.admin import create_topic, unique_topic_name
from streaming.kafka.headers.offset_header import OFFSET_HEADER
from tests.e2e.helpers import NO_SINK_COMPACTION, read_topic, run_once
from tests.kafka_helpers import Sent, produce

pytestmark = pytest.mark.integration

HOUR = 3_600_000
FORCE = "max.compaction.lag.ms=60000"
VERSION = "ver"


SUMMARY = re.compile(r"^\d+ of \d+ partitions verified")


def verify(bootstrap: str, source: str, sink: str, capsys, *extra: str) -> tuple[int, list[str]]:
    """Verify's exit status and lines: the summary comes first (pinned here), and is returned last, after
    the verdict lines; --json's document as printed."""
    capsys.readouterr()
    code = main(["verify", "--bootstrap-servers", bootstrap, "--source-topic", source, "--sink-topic", sink, *extra])
    out = capsys.readouterr().out.splitlines()
    if "--json" in extra:
        return code, out
    assert SUMMARY.match(out[0]), out
    return code, [*out[1:], out[0]]


def version(n: int) -> list[tuple[str, bytes]]:
    return [(VERSION, n.to_bytes(8, "big", signed=True))]


@pytest.fixture
def mirrored(spark, bootstrap_servers, new_topic, tmp_path) -> tuple[str, str, list[Sent]]:
    """A source of two partitions (updates, tombstones, versions written out of order) and the sink the
    job made of it under the header strategy."""
    src, sink = new_topic(partitions=2), unique_topic_name("sink")
    past = int(time.time() * 1000) - 2 * HOUR
    sent = produce(bootstrap_servers, src, [
        Sent(i % 2, b"key-%d" % (i % 40), None if i % 13 == 0 else b"v%d" % i, past + i, version((i * 7) % 50))
        for i in range(400)])
    # an uncompacted sink (NO_SINK_COMPACTION): the tests append to it by hand and judge what verify says of
    # those records, which the broker's cleaner would otherwise remove while a test reads them
    assert run_once(bootstrap_servers, src, sink, str(tmp_path), FORCE, "compaction.strategy=header",
                    f"compaction.strategy.header={VERSION}", sink_config=NO_SINK_COMPACTION) == 0
    return src, sink, sent


def test_a_sink_the_job_wrote_passes_and_says_so_per_partition(bootstrap_servers, mirrored, capsys) -> None:
    src, sink, _ = mirrored
    strategy = ("--config", "compaction.strategy=header", "--config", f"compaction.strategy.header={VERSION}")
    code, out = verify(bootstrap_servers, src, sink, capsys, *strategy)
    assert code == 0, out
    assert [line.split(":")[0] for line in out[:2]] == [f"ok   {src}-0 -> {sink}-0", f"ok   {src}-1 -> {sink}-1"]
    progress = read_topic(bootstrap_servers, sink, 2)[0][-1]["source_offset"]
    assert (f": checked {progress + 1} source records up to offset {progress} of the source's end 200, caught up; "
            f"20 keys, ") in out[0], out[0]
    assert out[-1] == "2 of 2 partitions verified; every sink caught up with its source"
    code, out = verify(bootstrap_servers, src, sink, capsys, *strategy, "--json")
    doc = json.loads("\n".join(out))
    assert code == 0 and doc["ok"] and [p["mismatches"] for p in doc["partitions"]] == [0, 0]
    assert all(p["keys"] == 20 and p["source_records"] > 0 and len(p["digest"]) == 16 for p in doc["partitions"])
    # judged by offset, the same sink is wrong: the job ranked by version
    code, out = verify(bootstrap_servers, src, sink, capsys)
    assert code == 1 and out[0].startswith("FAIL") and "key 'key-" in out[0], out


def test_an_older_record_appended_by_a_plain_producer_fails_naming_its_key(bootstrap_servers, mirrored,
                                                                           capsys) -> None:
    src, sink, sent = mirrored
    last = read_topic(bootstrap_servers, sink, 2)[0][-1]
    older = next(s for s in sent if s.partition == 0 and s.key == last["key"] and s.offset < last["source_offset"])
    producer = Producer({"bootstrap.servers": bootstrap_servers})
    producer.produce(sink, key=older.key, value=older.value, partition=0,
                     headers=older.headers + [(OFFSET_HEADER, str(older.offset).encode())])
    assert producer.flush(30) == 0
    code, out = verify(bootstrap_servers, src, sink, capsys, "--config", "compaction.strategy=header",
                       "--config", f"compaction.strategy.header={VERSION}")
    assert code == 1, out
    assert out[0].startswith(f"FAIL {src}-0") and f"kcompact.offset {older.offset} does not increase" in out[0]
    assert f"key {last['key'].decode()!r}: source winner offset {last['source_offset']}" in out[0], out[0]
    assert out[1].startswith(f"ok   {src}-1")
    assert out[-1] == "1 of 2 partitions verified; 2 mismatches; every sink caught up with its source"


def test_a_winner_missing_from_the_sink_fails_naming_its_key(bootstrap_servers, mirrored, capsys) -> None:
    src, sink, _ = mirrored
    copy = create_topic(bootstrap_servers, unique_topic_name("copy"), 2)
    got = read_topic(bootstrap_servers, sink, 2)
    dropped = next(r for r in got[1] if r["value"] is not None)
    producer = Producer({"bootstrap.servers": bootstrap_servers, "enable.idempotence": True})
    for p, records in got.items():
        for r in records:
            if r is not dropped:
                producer.produce(copy, key=r["key"], value=r["value"], partition=p, timestamp=r["timestamp"],
                                 headers=r["headers"])
    assert producer.flush(30) == 0
    code, out = verify(bootstrap_servers, src, copy, capsys, "--config", "compaction.strategy=header",
                       "--config", f"compaction.strategy.header={VERSION}")
    assert code == 1 and out[0].startswith("ok ") and out[1].startswith(f"FAIL {src}-1"), out
    assert (f"key {dropped['key'].decode()!r}: source winner offset {dropped['source_offset']} (value), "
            f"sink has no record") in out[1]


def test_a_source_that_lost_its_start_says_which_range_it_could_not_check(bootstrap_servers, mirrored, capsys) -> None:
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient

    src, sink, _ = mirrored
    admin = AdminClient({"bootstrap.servers": bootstrap_servers})
    admin.delete_records([TopicPartition(src, 0, 50)])[TopicPartition(src, 0, 50)].result(30)
    code, out = verify(bootstrap_servers, src, sink, capsys, "--config", "compaction.strategy=header",
                       "--config", f"compaction.strategy.header={VERSION}")
    assert code == 0, out
    assert "not checked: offsets [0, 50) are gone from the source (retention or deletion)" in out[0]


def test_the_state_dir_gives_clusters_topics_and_strategy_and_a_sink_behind_is_said_so(
        bootstrap_servers, mirrored, tmp_path, capsys) -> None:
    """--state-dir alone verifies every topic the job mirrors, ranked as the job ranked them (by version here:
    judged by offset, the same sink fails). New winners on the source that the job has not emitted yet make
    the verdict LAG, naming how many, and the summary says the check went only as far as the sink."""
    src, sink, _ = mirrored
    capsys.readouterr()
    assert main(["verify", "--state-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0] for line in out[1:3]] == [f"ok   {src}-0 -> {sink}-0", f"ok   {src}-1 -> {sink}-1"]
    late = int(time.time() * 1000)
    produce(bootstrap_servers, src, [Sent(0, b"key-new-%d" % i, b"late", late + i, version(1)) for i in range(3)]
            + [Sent(1, b"key-old", b"late", late, version(-1))])  # key-old: no such key before, so a winner too
    capsys.readouterr()
    assert main(["verify", "--state-dir", str(tmp_path), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["ok"] and doc["behind"] and [p["owed"] for p in doc["partitions"]] == [3, 1], doc
    assert [p["source_end"] for p in doc["partitions"]] == [203, 201]
    capsys.readouterr()
    assert main(["verify", "--state-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1].startswith(f"LAG  {src}-0 -> {sink}-0: checked ") and "of the source's end 203, lag 3 winners " \
        "not in the sink yet" in out[1], out
    assert out[0] == "2 of 2 partitions verified; 2 behind their source by 4 winners in all, checked only up to " \
                      "what each sink holds", out


def test_mistakes_get_one_line(bootstrap_servers, new_topic, capsys) -> None:
    src = new_topic(partitions=1)
    assert main(["verify", "--bootstrap-servers", bootstrap_servers, "--source-topic", src, "--source-topic", "b",
                 "--sink-topic", "s"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("kcompact: error: --sink-topic names one sink"), err
    assert main(["verify", "--bootstrap-servers", bootstrap_servers, "--source-topic", src,
                 "--sink-topic", unique_topic_name("absent")]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and "does not exist on the sink cluster" in err[0], err
    assert main(["verify", "--bootstrap-servers", "127.0.0.1:1", "--source-topic", src, "--sink-topic", "s",
                 "--cluster-timeout", "2"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("kcompact: error: the source cluster at 127.0.0.1:1 did not answer"), err
