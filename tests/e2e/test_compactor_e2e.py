"""End to end through the CLI against the real broker: the sink compared with the reference model."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest
from confluent_kafka.admin import AdminClient

from streaming.cli.main import main
from streaming.state.locks import StateDirLock
from streaming.state.layout import list_log_dirs
from streaming.state.stores import open_state_dir
from streaming.log.manifest import load_newest, manifest_dir, objects_dir
from streaming.kafka.admin import unique_topic_name
from tests.e2e.helpers import NO_SINK_COMPACTION, assert_sink_headers, dump_json, read_topic, run_once, sent_view, sink_view, status_json, winners
from tests.kafka_helpers import Sent, produce

pytestmark = pytest.mark.integration

HOUR = 3_600_000
FORCE = "max.compaction.lag.ms=60000"  # records below are hours old: the active segment rolls, all is cleanable


def now_ms() -> int:
    return int(time.time() * 1000)


def version(n: int) -> list[tuple[str, bytes]]:
    return [("ver", n.to_bytes(8, "big", signed=True))]


def test_dedupe_many_keys_several_writes_several_partitions(spark, bootstrap_servers, new_topic, tmp_path) -> None:
    src, sink = new_topic(partitions=3), unique_topic_name("sink")
    past = now_ms() - 2 * HOUR
    sent = produce(bootstrap_servers, src, [Sent(i % 3, b"key-%d" % (i % 60), b"v%d" % i, past + i,
                                                 [("origin", b"test"), ("origin", None)]) for i in range(600)])
    assert run_once(bootstrap_servers, src, sink, str(tmp_path), FORCE) == 0
    got = read_topic(bootstrap_servers, sink, 3)
    for p in range(3):
        expected = winners([s for s in sent if s.partition == p])
        assert len(expected) == 20
        assert sink_view(got[p]) == sent_view(expected)
        for rec, s in zip(got[p], expected, strict=True):
            assert rec["timestamp"] == s.timestamp
            assert_sink_headers(rec["headers"], s)


def test_tombstone_is_emitted_then_leaves_the_log_after_its_horizon(spark, bootstrap_servers, new_topic, tmp_path,
                                                                   capsys) -> None:
    src, sink = new_topic(partitions=1), unique_topic_name("sink")
    past = now_ms() - 2 * HOUR
    sent = produce(bootstrap_servers, src, [Sent(0, b"k1", b"a", past), Sent(0, b"k2", b"b", past + 1),
                                            Sent(0, b"k1", None, past + 2)])
    assert run_once(bootstrap_servers, src, sink, str(tmp_path), FORCE, "delete.retention.ms=2000") == 0
    assert sink_view(read_topic(bootstrap_servers, sink, 1)[0]) == sent_view(sent[1:])
    records = dump_json(str(tmp_path), capsys)
    tomb = [r for r in records if r["value"] is None]
    assert len(tomb) == 1 and tomb[0]["delete_horizon_ms"] is not None
    time.sleep(max(0.0, (tomb[0]["delete_horizon_ms"] - now_ms()) / 1000) + 0.1)

    assert run_once(bootstrap_servers, src, sink, str(tmp_path), FORCE, "delete.retention.ms=2000") == 0
    after = dump_json(str(tmp_path), capsys)
    assert [(r["offset"], r["key"], r["value"]) for r in after] == [(1, "k2", "b")]
    assert sink_view(read_topic(bootstrap_servers, sink, 1)[0]) == sent_view(sent[1:]), "nothing emitted twice"
    assert status_json(str(tmp_path), capsys)["partitions"][0]["tombstones_removed"] == 1


def test_min_lag_leaves_young_records_unemitted(spark, bootstrap_servers, new_topic, tmp_path, capsys) -> None:
    """Old records in one append, young ones in the next: time rolls once per append, as Kafka's do once per
    produce request, so the four in one append would share a segment that min.compaction.lag.ms holds whole."""
    src, sink = new_topic(partitions=1), unique_topic_name("sink")
    now = now_ms()
    config = ("min.compaction.lag.ms=3600000", "max.compaction.lag.ms=7200000", "segment.ms=3600000")
    sent = produce(bootstrap_servers, src, [Sent(0, b"a", b"old-a", now - 3 * HOUR),
                                            Sent(0, b"b", b"old-b", now - 3 * HOUR + 1)])
    assert run_once(bootstrap_servers, src, sink, str(tmp_path), *config) == 0
    sent += produce(bootstrap_servers, src, [Sent(0, b"a", b"young-a", now), Sent(0, b"c", b"young-c", now + 1)])
    assert run_once(bootstrap_servers, src, sink, str(tmp_path), *config) == 0
    assert sink_view(read_topic(bootstrap_servers, sink, 1)[0]) == sent_view(sent[:2])
    part = status_json(str(tmp_path), capsys)["partitions"][0]
    assert part["first_uncleanable_offset"] == 2 and part["records"] == 4 and part["emitted_up_to"] == 1


def test_a_stage_of_several_passes_emits_only_the_winners(spark, bootstrap_servers, new_topic, tmp_path,
                                                          capsys) -> None:
    """20,000 records of 10,000 keys, each written twice; the dedupe buffer maps 4,500 keys a pass, so one run
    makes five passes. Each pass's winners that a later pass removes never reach the sink."""
    src, sink = new_topic(partitions=1), unique_topic_name("sink")
    past = now_ms() - 2 * HOUR
    keys = 10_000
    sent = produce(bootstrap_servers, src, [Sent(0, b"key-%d" % (i % keys), b"v%d" % i, past + i) for i in range(2 * keys)])
    buffer = 24 * 5000  # 5000 slots, 4500 keys at the 0.9 load factor
    assert run_once(bootstrap_servers, src, sink, str(tmp_path), FORCE, f"log.cleaner.dedupe.buffer.size={buffer}") == 0
    assert status_json(str(tmp_path), capsys)["partitions"][0]["passes"] == 5
    assert sink_view(read_topic(bootstrap_servers, sink, 1)[0]) == sent_view(winners(sent)) == sent_view(sent[keys:])


@pytest.mark.parametrize("strategy", ["timestamp", "header"])
def test_version_strategies_with_out_of_order_producers(spark, bootstrap_servers, new_topic, tmp_path,
                                                        strategy: str) -> None:
    src, sink = new_topic(partitions=2), unique_topic_name("sink")
    past = now_ms() - 2 * HOUR
    order = [5, 1, 9, 3, 9, 2, 7, 0, 4, 8, 6, 6]  # versions as two producers interleave them, with ties
    records = []
    for i, v in enumerate(order * 4):
        key = b"k%d" % (i % 5)
        headers = version(v) if strategy == "header" and i % 7 else []  # some records carry no version
        records.append(Sent(i % 2, key, b"v%d-%d" % (v, i), past + (v * 1000 if strategy == "timestamp" else i), headers))
    sent = produce(bootstrap_servers, src, records)
    config = [FORCE, f"compaction.strategy={strategy}"] + (["compaction.strategy.header=ver"] if strategy == "header" else [])
    assert run_once(bootstrap_servers, src, sink, str(tmp_path), *config) == 0
    got = read_topic(bootstrap_servers, sink, 2)
    for p in range(2):
        expected = winners([s for s in sent if s.partition == p], strategy, "ver")
        assert sink_view(got[p]) == sent_view(expected)


@pytest.mark.parametrize("policy", ["drop", "dead-letter", "fail"])
def test_keyless_records_per_policy(spark, bootstrap_servers, new_topic, tmp_path, capsys, policy: str) -> None:
    src, sink, dlq = new_topic(partitions=1), unique_topic_name("sink"), unique_topic_name("dlq")
    past = now_ms() - 2 * HOUR
    sent = produce(bootstrap_servers, src, [Sent(0, b"a", b"1", past), Sent(0, None, b"no-key-1", past + 1),
                                            Sent(0, b"a", b"2", past + 2), Sent(0, None, b"no-key-2", past + 3)])
    extra = ("--dead-letter-topic", dlq) if policy == "dead-letter" else ()
    code = run_once(bootstrap_servers, src, sink, str(tmp_path), FORCE, f"compaction.keyless.policy={policy}",
                    extra=extra)
    part = status_json(str(tmp_path), capsys)["partitions"][0]
    if policy == "fail":
        assert code == 1
        assert part["uncleanable"] and "offset 1 has no key" in part["uncleanable_error"]
        assert read_topic(bootstrap_servers, sink, 1)[0] == []
        assert part["records"] == 4, "nothing is lost: the log keeps every record"
        return
    assert code == 0
    assert sink_view(read_topic(bootstrap_servers, sink, 1)[0]) == sent_view([sent[2]])
    assert part["keyless_records"] == 2
    if policy == "dead-letter":
        letters = [r for recs in read_topic(bootstrap_servers, dlq, 1).values() for r in recs]
        assert sorted((r["source_offset"], r["value"]) for r in letters) == [(1, b"no-key-1"), (3, b"no-key-2")]


def test_second_run_emits_only_what_is_new(spark, bootstrap_servers, new_topic, tmp_path) -> None:
    src, sink = new_topic(partitions=2), unique_topic_name("sink")
    past = now_ms() - 2 * HOUR
    first = produce(bootstrap_servers, src, [Sent(i % 2, b"k%d" % (i % 8), b"a%d" % i, past + i) for i in range(40)])
    # an uncompacted sink (NO_SINK_COMPACTION): both runs' records are read, the first run's superseded ones too
    assert run_once(bootstrap_servers, src, sink, str(tmp_path), FORCE, sink_config=NO_SINK_COMPACTION) == 0
    second = produce(bootstrap_servers, src, [Sent(i % 2, b"k%d" % (i % 12), b"b%d" % i, past + 100 + i)
                                              for i in range(24)])
    assert run_once(bootstrap_servers, src, sink, str(tmp_path), FORCE, sink_config=NO_SINK_COMPACTION) == 0
    got = read_topic(bootstrap_servers, sink, 2)
    for p in range(2):
        a = [s for s in first if s.partition == p]
        b = [s for s in second if s.partition == p]
        new = [s for s in winners(a + b) if s.offset >= b[0].offset]
        assert sink_view(got[p]) == sent_view(winners(a) + new)


def test_bad_input_is_refused_before_anything_runs(bootstrap_servers, new_topic, tmp_path, capsys) -> None:
    src = new_topic(partitions=3)
    base = ["run", "--bootstrap-servers", bootstrap_servers, "--state-dir", str(tmp_path), "--once"]
    cases = [
        (["--source-topic", src, "--sink-topic", "s", "--config", "no.such.key=1"], "no.such.key"),
        (["--source-topic", src, "--sink-topic", "s", "--config", "max.compaction.lag.ms=1",
          "--config", "min.compaction.lag.ms=5"], "max.compaction.lag.ms"),
        (["--source-topic", "no-such-source-topic", "--sink-topic", "s"], "no-such-source-topic"),
        (["--source-topic", src, "--sink-topic", "s", "--config", "compaction.keyless.policy=dead-letter"],
         "--dead-letter-topic"),
        (["--source-topic", src, "--sink-topic", "s", "--kafka", "novalue"], "--kafka: takes KEY=VALUE"),
    ]
    for args, message in cases:
        capsys.readouterr()
        assert main(base + args) == 2, args
        err = capsys.readouterr().err
        assert err.startswith("kcompact: error:") and message in err, err
    assert not os.path.exists(os.path.join(str(tmp_path), "logs"))


def test_second_compactor_on_the_same_state_dir_is_refused(bootstrap_servers, new_topic, tmp_path, capsys) -> None:
    src = new_topic(partitions=1)
    held = StateDirLock(open_state_dir(str(tmp_path)))
    try:
        capsys.readouterr()
        assert main(["run", "--bootstrap-servers", bootstrap_servers, "--source-topic", src, "--sink-topic",
                     unique_topic_name("sink"), "--state-dir", str(tmp_path), "--once"]) == 2
        assert f"in use by another compactor (pid {os.getpid()})" in capsys.readouterr().err
    finally:
        held.release()


def test_idle_topic_reaches_the_sink_within_max_lag_below_the_dirty_ratio(bootstrap_servers, new_topic, tmp_path) -> None:
    """The continuous job: updates far below min.cleanable.dirty.ratio, then silence; max lag still emits."""
    src, sink = new_topic(partitions=1), unique_topic_name("sink")
    base = produce(bootstrap_servers, src, [Sent(0, b"k%d" % i, b"base", now_ms()) for i in range(20)])
    proc = subprocess.Popen([sys.executable, "-m", "streaming", "run", "--bootstrap-servers", bootstrap_servers,
                             "--source-topic", src, "--sink-topic", sink, "--state-dir", str(tmp_path),
                             "--trigger-interval", "1", "--config", "max.compaction.lag.ms=3000",
                             "--config", "min.cleanable.dirty.ratio=0.99", *sum((["--sink-topic-config", c] for c in
                             ("cleanup.policy=delete", "retention.ms=-1")), [])],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        def sink_now() -> list[tuple]:
            return sink_view(read_topic(bootstrap_servers, sink, 1).get(0, []))

        deadline = time.monotonic() + 120
        while sink_now() != sent_view(base) and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(1)
        assert sink_now() == sent_view(base)
        update = produce(bootstrap_servers, src, [Sent(0, b"k3", b"updated", now_ms())])
        deadline = time.monotonic() + 60
        while sink_now() != sent_view(base + update) and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.5)
        assert sink_now() == sent_view(base + update)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            code = proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise
    assert code == 0, proc.stderr.read()[-3000:]


def test_a_recreated_sink_receives_every_winner_again(spark, bootstrap_servers, new_topic, tmp_path) -> None:
    """The sink is the record of emission: a run that finds it emptied re-emits every winner, even for
    partitions with nothing new to clean."""
    src, sink = new_topic(partitions=2), unique_topic_name("sink")
    past = now_ms() - 2 * HOUR
    sent = produce(bootstrap_servers, src, [Sent(i % 2, b"k%d" % (i % 6), b"v%d" % i, past + i) for i in range(30)])
    assert run_once(bootstrap_servers, src, sink, str(tmp_path), FORCE) == 0
    admin = AdminClient({"bootstrap.servers": bootstrap_servers})
    admin.delete_topics([sink])[sink].result(30)
    deadline = time.monotonic() + 30
    while sink in admin.list_topics(timeout=10).topics and time.monotonic() < deadline:
        time.sleep(0.2)
    assert run_once(bootstrap_servers, src, sink, str(tmp_path), FORCE) == 0
    got = read_topic(bootstrap_servers, sink, 2)
    for p in range(2):
        assert sink_view(got[p]) == sent_view(winners([s for s in sent if s.partition == p]))


def test_repeated_once_runs_keep_the_state_dir_within_a_few_objects_a_segment(spark, bootstrap_servers, new_topic,
                                                                             tmp_path, capsys) -> None:
    """Short runs never reach the every-32-commits collection; each run ends by collecting what its logs no
    longer need, so the state dir does not fill with replaced objects (max.compaction.lag.ms=1: a roll and a
    pass every run)."""
    src, sink = new_topic(partitions=2), unique_topic_name("sink")
    config = ("max.compaction.lag.ms=1", "min.cleanable.dirty.ratio=0.01", "file.delete.delay.ms=0")
    sent = []
    for run in range(8):
        sent += produce(bootstrap_servers, src, [Sent(i % 2, b"k%d" % (i % 40), b"r%d-%d" % (run, i), now_ms())
                                                 for i in range(300)])
        time.sleep(0.01)
        assert run_once(bootstrap_servers, src, sink, str(tmp_path), *config) == 0
    for part in status_json(str(tmp_path), capsys)["partitions"]:
        log = tmp_path / "logs" / f"{src}-{part['partition']}"
        objects, manifests = len(list((log / "segments").iterdir())), len(list((log / "manifests").iterdir()))
        print(f"partition {part['partition']}: {part['segments']} segments, {objects} objects, {manifests} manifests")
        assert objects <= 3 * part["segments"] + 8 and manifests <= 8, (part["segments"], objects, manifests)
    got = read_topic(bootstrap_servers, sink, 2)
    for p in range(2):
        assert {r["key"]: r["source_offset"] for r in got[p]} == {s.key: s.offset for s in winners(
            [s for s in sent if s.partition == p])}


def test_a_drain_with_nothing_new_starts_no_spark_and_a_second_drain_cleans_whatever_the_dirty_ratio(
        spark, bootstrap_servers, new_topic, tmp_path, monkeypatch, capsys) -> None:
    """--once --drain rolls every active segment: once a drain has emitted everything and nothing new came,
    every active segment is empty and the next drain has nothing to do, so it ends as --once does, in one
    line and without Spark. A few new records on the drained log are far below min.cleanable.dirty.ratio
    (0.5 by default), and the next drain cleans and emits them all the same."""
    import streaming.spark.session

    src, sink = new_topic(partitions=2), unique_topic_name("sink")
    now = now_ms()
    sent = produce(bootstrap_servers, src, [Sent(i % 2, b"k%d" % (i % 6), b"v%d" % i, now + i) for i in range(30)])
    drain = ("--drain",)
    assert run_once(bootstrap_servers, src, sink, str(tmp_path), extra=drain) == 0
    started = []
    build = streaming.spark.session.build_session
    monkeypatch.setattr(streaming.spark.session, "build_session", lambda *a, **k: started.append(1) or build(*a, **k))
    capsys.readouterr()
    assert run_once(bootstrap_servers, src, sink, str(tmp_path), extra=drain) == 0
    said = capsys.readouterr()
    err = [line for line in said.err.splitlines() if line.strip()]
    assert not started and len(err) == 2 and said.out.startswith("mirroring 1 topic(s) (2 partitions)"), said
    assert "ending without starting Spark" in err[0] and " done: 0 records ingested, 0 passes" in err[1], err
    sent += produce(bootstrap_servers, src, [Sent(p, b"k-new%d" % p, b"new", now + 100) for p in (0, 1)])
    assert run_once(bootstrap_servers, src, sink, str(tmp_path), extra=drain) == 0
    assert started
    assert "2 records emitted" in capsys.readouterr().err
    got = read_topic(bootstrap_servers, sink, 2)
    for p in range(2):
        assert sink_view(got[p]) == sent_view(winners([s for s in sent if s.partition == p]))


def test_a_once_run_leaves_only_what_each_logs_newest_manifest_names(spark, bootstrap_servers, new_topic,
                                                                     tmp_path) -> None:
    """The passes of a --once run over a backlog replace nearly every object it appended; the end of the run
    deletes them at once rather than after file.delete.delay.ms, which a --once run never lives to see."""
    src, sink = new_topic(partitions=2), unique_topic_name("sink")
    past = now_ms() - 2 * HOUR
    produce(bootstrap_servers, src, [Sent(i % 2, b"k%d" % (i % 10), b"v" * 200, past + i) for i in range(3000)])
    assert run_once(bootstrap_servers, src, sink, str(tmp_path), FORCE, "segment.bytes=20000") == 0
    state = open_state_dir(str(tmp_path))
    for log_dir in list_log_dirs(state):
        manifest = load_newest(state.storage, log_dir.directory).manifest
        assert manifest is not None and len(state.storage.list(manifest_dir(log_dir.directory))) == 1
        named = {c.name for s in manifest.segments for c in s.chunks}
        assert {i.name for i in state.storage.list(objects_dir(log_dir.directory))} == named


def test_a_once_run_with_nothing_new_and_nothing_due_starts_no_spark(spark, bootstrap_servers, new_topic, tmp_path,
                                                                     monkeypatch, capsys) -> None:
    """Nothing past the checkpoint on the source, no partition due for a pass, the sink holding all that was
    cleaned: the run ends without a Spark session. A new record, or a sink that lost what was emitted,
    starts Spark again."""
    import streaming.spark.session

    src, sink = new_topic(partitions=2), unique_topic_name("sink")
    past = now_ms() - 2 * HOUR
    sent = produce(bootstrap_servers, src, [Sent(i % 2, b"k%d" % (i % 6), b"v%d" % i, past + i) for i in range(30)])
    assert run_once(bootstrap_servers, src, sink, str(tmp_path), FORCE) == 0
    started = []
    build = streaming.spark.session.build_session
    monkeypatch.setattr(streaming.spark.session, "build_session", lambda *a, **k: started.append(1) or build(*a, **k))
    capsys.readouterr()
    assert run_once(bootstrap_servers, src, sink, str(tmp_path), FORCE) == 0
    assert not started and "ending without starting Spark" in capsys.readouterr().err
    sent += produce(bootstrap_servers, src, [Sent(0, b"k-new", b"new", past + 100)])
    assert run_once(bootstrap_servers, src, sink, str(tmp_path), FORCE) == 0
    assert started
    got = read_topic(bootstrap_servers, sink, 2)
    for p in range(2):
        assert sink_view(got[p]) == sent_view(winners([s for s in sent if s.partition == p]))
