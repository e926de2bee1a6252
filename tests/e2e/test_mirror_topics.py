"""Mirroring many topics in one job, on the real broker: a pattern, a topic created while the job runs,
a partition added to a source, offset translation, dead letters that say where they came from, and the
setups the job refuses before it creates or writes anything."""

from __future__ import annotations

import json
import os
import signal
import threading
import time

import pytest
from confluent_kafka import Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions

from streaming.cli.main import main
from streaming.kafka.admin import create_topic, unique_topic_name
from streaming.kafka.sink.dead_letters import PARTITION_HEADER, TOPIC_HEADER
from tests.e2e.helpers import (NO_SINK_COMPACTION, IncompleteRead, assert_sink_contract, read_topic, run_once,
                               status_json, winners)
from tests.kafka_helpers import Sent, produce

pytestmark = pytest.mark.integration

FAST = ["--config", "max.compaction.lag.ms=1000", "--config", "min.cleanable.dirty.ratio=0.5"]


def _changes(partitions: int, n: int, keys: int, at_ms: int, tag: bytes = b"") -> list[Sent]:
    return [Sent(i % partitions, b"k%d" % (i % keys), tag + b"v%d" % i, at_ms + i) for i in range(n)]


def _matches(bootstrap: str, sink: str, sent: list[Sent], partitions: int) -> bool:
    try:
        got = read_topic(bootstrap, sink, partitions, timeout_s=5)
    except (KafkaException, IncompleteRead):  # the sink has not grown to the source's partitions yet
        return False
    for p in range(partitions):
        last = {r["key"]: r["source_offset"] for r in got.get(p, [])}
        if last != {s.key: s.offset for s in winners([s for s in sent if s.partition == p])}:
            return False
    return True


def test_a_pattern_mirrors_every_matching_topic_and_follows_new_topics_and_partitions(
        bootstrap_servers, tmp_path, capsys) -> None:
    prefix = unique_topic_name("mirror")
    a, b = create_topic(bootstrap_servers, f"{prefix}-a", 2), create_topic(bootstrap_servers, f"{prefix}-b", 1)
    create_topic(bootstrap_servers, unique_topic_name("unrelated"), 1)
    sent = {a: produce(bootstrap_servers, a, _changes(2, 60, 7, int(time.time() * 1000))),
            b: produce(bootstrap_servers, b, _changes(1, 40, 5, int(time.time() * 1000)))}
    parts = {a: 2, b: 1}
    c = f"{prefix}-c"
    done = threading.Event()
    failure: list[str] = []

    def sink(t: str) -> str:
        return f"{t}.compacted"

    def drive() -> None:
        """While the job runs: wait for the first sinks, then add a topic and a partition, then wait again."""
        try:
            deadline = time.monotonic() + 240
            while not all(_matches(bootstrap_servers, sink(t), sent[t], parts[t]) for t in (a, b)):
                if time.monotonic() > deadline:
                    raise AssertionError("the first two sinks never matched the model")
                time.sleep(1)
            create_topic(bootstrap_servers, c, 2)
            sent[c], parts[c] = produce(bootstrap_servers, c, _changes(2, 30, 4, int(time.time() * 1000))), 2
            admin = AdminClient({"bootstrap.servers": bootstrap_servers})  # held: its futures need it alive
            for f in admin.create_partitions([NewPartitions(a, 3)]).values():
                f.result(30)
            parts[a] = 3
            sent[a] += produce(bootstrap_servers, a, [Sent(2, b"k%d" % i, b"new-%d" % i, int(time.time() * 1000))
                                                      for i in range(10)])
            while not all(_matches(bootstrap_servers, sink(t), sent[t], parts[t]) for t in (a, b, c)):
                if time.monotonic() > deadline + 120:
                    raise AssertionError("the new topic or the new partition never reached its sink")
                time.sleep(1)
        except BaseException as exc:  # noqa: BLE001 (reported by the test below)
            failure.append(repr(exc))
        finally:
            done.set()
            os.kill(os.getpid(), signal.SIGTERM)  # the job's own stop: it finishes its trigger and returns

    previous = signal.signal(signal.SIGTERM, lambda *_: None)  # a SIGTERM after the job has returned is harmless
    try:
        driver = threading.Thread(target=drive, daemon=True)
        driver.start()
        # the pattern matches the three sources, not their sinks (a sink it matched would be refused)
        # an uncompacted sink (NO_SINK_COMPACTION): reads every record emitted to each sink
        code = main(["run", "--bootstrap-servers", bootstrap_servers, "--source-topic-pattern", f"{prefix}-[a-z]",
                     "--sink-topic-template", "{topic}.compacted", "--state-dir", str(tmp_path),
                     "--trigger-interval", "1", *NO_SINK_COMPACTION, *FAST])
        assert code == 0 and done.wait(30)
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert not failure, failure[0]
    for t in (a, b, c):
        assert_sink_contract(bootstrap_servers, sink(t), sent[t], parts[t])
    assert len(read_topic(bootstrap_servers, sink(a), 3)) == 3, "the sink grew with its source"
    status = status_json(str(tmp_path), capsys)
    assert {p["topic"] for p in status["partitions"]} == {a, b, c}
    assert status["topics"][a] == {**status["topics"][a], "sink": sink(a), "partitions": 3}


def test_translate_gives_where_a_consumer_of_the_source_resumes_on_the_sink(bootstrap_servers, new_topic,
                                                                          tmp_path, capsys) -> None:
    src, sink = new_topic(partitions=1), unique_topic_name("sink")
    sent = produce(bootstrap_servers, src, _changes(1, 300, 40, int(time.time() * 1000) - 3_600_000))
    assert run_once(bootstrap_servers, src, sink, str(tmp_path), "max.compaction.lag.ms=60000") == 0
    emitted = read_topic(bootstrap_servers, sink, 1)[0]
    assert len(emitted) == 40
    consumer = Consumer({"bootstrap.servers": bootstrap_servers, "group.id": sink, "isolation.level": "read_committed"})
    try:
        for offset in (0, 1, 150, 261, 299, 300, 10_000):
            capsys.readouterr()
            assert main(["translate", "--state-dir", str(tmp_path), "--topic", src, "--partition", "0",
                         "--offset", str(offset), "--json"]) == 0
            at = json.loads(capsys.readouterr().out)["sink_offset"]
            consumer.assign([TopicPartition(sink, 0, at)])
            seen = [r for r in emitted if r["offset"] >= at]
            first = consumer.consume(1, timeout=10) if seen else []
            assert [m.offset() for m in first] == [r["offset"] for r in seen[:1]]
            assert all(r["source_offset"] >= offset for r in seen), "a consumer resuming there sees nothing older"
            assert all(r["source_offset"] < offset for r in emitted if r["offset"] < at), "and misses nothing newer"
    finally:
        consumer.close()
    assert sent[-1].offset == 299
    capsys.readouterr()
    assert main(["translate", "--state-dir", str(tmp_path), "--topic", "not-mirrored", "--partition", "0",
                 "--offset", "1"]) == 2
    assert "not mirrored" in capsys.readouterr().err


def test_dead_letters_keep_their_partition_and_say_where_they_came_from(bootstrap_servers, new_topic,
                                                                       tmp_path) -> None:
    src, sink, dlq = new_topic(partitions=2), unique_topic_name("sink"), unique_topic_name("dlq")
    past = int(time.time() * 1000) - 3_600_000
    produce(bootstrap_servers, src, [Sent(p, k, b"%d" % i, past + i) for i, (p, k) in enumerate(
        [(0, b"a"), (1, None), (1, b"b"), (0, None), (1, None)])])
    assert run_once(bootstrap_servers, src, sink, str(tmp_path), "max.compaction.lag.ms=60000",
                    "compaction.keyless.policy=dead-letter", extra=("--dead-letter-topic", dlq)) == 0
    letters = read_topic(bootstrap_servers, dlq, 2)
    where = {p: [(dict(r["headers"])[TOPIC_HEADER], dict(r["headers"])[PARTITION_HEADER], r["source_offset"])
                 for r in recs] for p, recs in letters.items()}
    assert where == {0: [(src.encode(), b"0", 1)], 1: [(src.encode(), b"1", 0), (src.encode(), b"1", 2)]}


def test_nothing_cleanable_yet_is_said_with_when_and_status_shows_it(bootstrap_servers, new_topic, tmp_path,
                                                                    capsys) -> None:
    src, sink = new_topic(partitions=1), unique_topic_name("sink")
    produce(bootstrap_servers, src, _changes(1, 20, 3, int(time.time() * 1000)))
    capsys.readouterr()
    assert run_once(bootstrap_servers, src, sink, str(tmp_path), "segment.ms=3600000") == 0
    said = [line for line in capsys.readouterr().err.splitlines() if "nothing is cleanable yet" in line]
    assert said and f"{src}-0 from offset 0" in said[0] and "UTC" in said[0]
    part = status_json(str(tmp_path), capsys)["partitions"][0]
    assert part["next_clean_ms"] > time.time() * 1000 + 3_000_000 and part["next_clean_latest_ms"] is None


def test_refused_setups_create_and_write_nothing(bootstrap_servers, new_topic, tmp_path, capsys) -> None:
    src = new_topic(partitions=2)
    prefix = unique_topic_name("loop")
    looped = create_topic(bootstrap_servers, f"{prefix}-x", 1)
    state = str(tmp_path / "state")
    base = ["run", "--bootstrap-servers", bootstrap_servers, "--state-dir", state, "--once"]
    cases = [
        (["--source-topic", src, "--sink-topic", src], "is itself a source of this job on the same cluster"),
        (["--source-topic-pattern", f"{prefix}-.*", "--sink-topic-template", "{topic}-copy"],
         f"sink topic '{looped}-copy' of source topic '{looped}' is itself a source"),
        (["--source-topic", src, "--source-topic", looped, "--sink-topic", "one"], "--sink-topic-template"),
        (["--source-topic", src, "--sink-topic-template", "compacted"], "must contain {topic}"),
        (["--source-topic", src, "--sink-topic", "s", "--starting-offsets", "yesterday"], "--starting-offsets: must be"),
        (["--source-topic", src, "--sink-topic", "s", "--starting-offsets", json.dumps({src: {"0": 0}})],
         "every partition"),
    ]
    for args, message in cases:
        capsys.readouterr()
        assert main(base + args) == 2, args
        err = capsys.readouterr().err
        assert err.startswith("kcompact: error:") and message in err and len(err.strip().splitlines()) == 1, err
    assert not os.path.exists(state), "nothing was written"
    topics = AdminClient({"bootstrap.servers": bootstrap_servers}).list_topics(timeout=30).topics
    assert f"{looped}-copy" not in topics and "one" not in topics

    sink = unique_topic_name("sink")
    assert run_once(bootstrap_servers, src, sink, state) == 0
    saved = (tmp_path / "state" / "kcompact.json").read_text()
    capsys.readouterr()
    assert main(base + ["--source-topic", looped, "--sink-topic", sink]) == 2
    err = capsys.readouterr().err
    assert "belongs to another mapping" in err and src in err and len(err.strip().splitlines()) == 1, err
    assert (tmp_path / "state" / "kcompact.json").read_text() == saved


def test_a_sink_with_fewer_partitions_than_its_source_is_given_more(bootstrap_servers, new_topic, tmp_path) -> None:
    src = new_topic(partitions=3)
    narrow = create_topic(bootstrap_servers, unique_topic_name("narrow"), 1)
    sent = produce(bootstrap_servers, src, _changes(3, 30, 5, int(time.time() * 1000) - 3_600_000))
    assert run_once(bootstrap_servers, src, narrow, str(tmp_path), "max.compaction.lag.ms=60000") == 0
    assert_sink_contract(bootstrap_servers, narrow, sent, 3)
