"""Consumer groups follow the mirror: a group that read part of the source, synced, then started on the sink
receives exactly the winners of what it had not read; the rules MirrorMaker 2 keeps hold."""

from __future__ import annotations

import json
import logging
import re
import time

import pytest
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, TopicPartition
from confluent_kafka.admin import AdminClient

from streaming.cli.main import main
from streaming.kafka.admin import Cluster, unique_topic_name
from streaming.kafka.headers.offset_header import source_offset
from streaming.kafka.groups.group_sync import Change, GroupOffsetSync, MirroredTopic
from tests.e2e.helpers import group_offsets, run_once, status_json, winners
from tests.kafka_helpers import Sent, produce

pytestmark = pytest.mark.integration

HOUR = 3_600_000
FORCE = "max.compaction.lag.ms=60000"  # the records are hours old: all of it is cleanable at once
PARTITIONS = 2


def _batch(first: int, n: int) -> list[Sent]:
    past = int(time.time() * 1000) - 2 * HOUR
    return [Sent(i % PARTITIONS, b"key-%d" % (i % 37), b"v%d" % i, past + i) for i in range(first, first + n)]


def _consume(bootstrap: str, group: str, topic: str, count: int | None) -> list[tuple[int, int, int | None]]:
    """A member of ``group`` reads ``count`` records (all there are, when None) from its committed offsets
    (the start of a partition it never committed) and commits what it read: (partition, offset, the
    kcompact.offset header on a sink record)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", "isolation.level": "read_committed"})
    got: list[tuple[int, int, bytes | None]] = []
    try:
        consumer.subscribe([topic])
        idle_since = time.monotonic()
        while (count is None or len(got) < count) and time.monotonic() - idle_since < 8:
            m = consumer.poll(0.5)
            if m is None:
                continue
            assert m.error() is None, m.error()
            idle_since = time.monotonic()
            got.append((m.partition(), m.offset(), m.headers() and source_offset(m.headers())))
        if got:
            consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    return got


def _committed(bootstrap: str, group: str, topic: str) -> dict[int, int]:
    return group_offsets(bootstrap, group, topic, PARTITIONS)


def _winner_offsets(sent: list[Sent], since: dict[int, int]) -> set[tuple[int, int]]:
    return {(p, s.offset) for p in range(PARTITIONS) for s in winners([s for s in sent if s.partition == p])
            if s.offset >= since.get(p, 0)}


def test_a_group_moved_to_the_sink_reads_exactly_the_winners_it_had_not_read(
        spark, bootstrap_servers, new_topic, tmp_path, capsys) -> None:
    src, sink = new_topic(partitions=PARTITIONS), unique_topic_name("sink")
    group = unique_topic_name("orders-app")
    sent = produce(bootstrap_servers, src, _batch(0, 600))
    _consume(bootstrap_servers, group, src, 250)
    committed = _committed(bootstrap_servers, group, src)
    assert sum(committed.values()) == 250

    assert run_once(bootstrap_servers, src, sink, str(tmp_path), FORCE,
                    extra=("--sync-group-offsets", re.escape(group))) == 0
    assert status_json(str(tmp_path), capsys)["group_sync"]["groups-synced"] == 1

    moved = _consume(bootstrap_servers, group, sink, None)
    assert len(moved) == len({(p, o) for p, _, o in moved}), "nothing twice"
    assert {(p, o) for p, _, o in moved} == _winner_offsets(sent, committed), \
        "exactly the winners of the records the group had not read on the source"

    # Beyond the sink: the group reads on past what the sink holds, a sync puts it at the sink's end, and
    # what the next run emits reaches it: it may re-read there, never skip.
    sent += produce(bootstrap_servers, src, _batch(600, 200))
    _consume(bootstrap_servers, group, src, None)
    beyond = _committed(bootstrap_servers, group, src)
    sent += produce(bootstrap_servers, src, _batch(800, 200))
    assert main(["sync-groups", "--state-dir", str(tmp_path), "--group", re.escape(group), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["offsets"]
    assert {r["partition"]: r["change"] for r in rows} == {p: Change.UP_TO_DATE.value for p in range(PARTITIONS)}, \
        "the sink's end, where the group already is"
    sink_end = _committed(bootstrap_servers, group, sink)
    assert run_once(bootstrap_servers, src, sink, str(tmp_path), FORCE) == 0
    later = _consume(bootstrap_servers, group, sink, None)
    assert _winner_offsets(sent, beyond) <= {(p, o) for p, _, o in later}, \
        "a winner past the group's source position was skipped"
    assert all(o >= sink_end[p] for p, o, _ in later), "re-read from where the sink ended, not before"


class _Said(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def test_active_groups_rewinds_and_other_groups_are_left_alone(spark, bootstrap_servers, new_topic, tmp_path,
                                                                capsys) -> None:
    src, sink = new_topic(partitions=PARTITIONS), unique_topic_name("sink")
    produce(bootstrap_servers, src, _batch(0, 300))
    app, other = unique_topic_name("billing"), unique_topic_name("audit")
    for group in (app, other):
        _consume(bootstrap_servers, group, src, 120)
    assert run_once(bootstrap_servers, src, sink, str(tmp_path), FORCE) == 0
    topics = [MirroredTopic(src, sink, PARTITIONS)]
    source, sink_cluster = Cluster("source", bootstrap_servers), Cluster("sink", bootstrap_servers)
    syncer = GroupOffsetSync(source, sink_cluster, re.compile(re.escape(app)))

    assert main(["sync-groups", "--state-dir", str(tmp_path), "--group", re.escape(app), "--dry-run"]) == 0
    out = capsys.readouterr().out
    read = len(_committed(bootstrap_servers, app, src))  # the partitions its 120 records came from
    rows = [line for line in out.splitlines() if line.startswith(app)]
    assert "change (would)" in out and len(rows) == read, out
    assert all(line.endswith(f"  {Change.COMMIT.value}") for line in rows), out
    assert _committed(bootstrap_servers, app, sink) == {}, "a dry run commits nothing"

    first = syncer.sync(topics)
    assert first.groups_synced == [app] and first.offsets_moved == read
    assert _committed(bootstrap_servers, other, sink) == {}, "a group the expression does not match is untouched"
    synced = _committed(bootstrap_servers, app, sink)

    # The sink group moved on by itself: a sync from the (older) source position would move it back.
    ahead = {p: o + 1 for p, o in synced.items()}
    admin = AdminClient({"bootstrap.servers": bootstrap_servers})  # held: a client gone takes its futures along
    admin.alter_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(app, [TopicPartition(sink, p, o) for p, o in ahead.items()])])[app].result(30)
    kept = syncer.sync(topics)
    assert {r.change for r in kept.rows} == {Change.KEPT_AHEAD} and _committed(bootstrap_servers, app, sink) == ahead
    rewinding = GroupOffsetSync(source, sink_cluster, re.compile(re.escape(app)), allow_rewind=True)
    assert {r.change for r in rewinding.sync(topics).rows} == {Change.REWIND}
    assert _committed(bootstrap_servers, app, sink) == synced

    # A member on the sink: the group is left as it is, and said once.
    member = Consumer({"bootstrap.servers": bootstrap_servers, "group.id": app, "enable.auto.commit": False})
    try:
        member.subscribe([sink])
        deadline = time.monotonic() + 30
        while not member.assignment() and time.monotonic() < deadline:
            member.poll(0.5)
        said = _Said()
        logging.getLogger("streaming.kafka.groups.group_sync").addHandler(said)
        try:
            for _ in range(2):
                assert {r.change for r in rewinding.sync(topics).rows} == {Change.ACTIVE}
        finally:
            logging.getLogger("streaming.kafka.groups.group_sync").removeHandler(said)
        assert len([line for line in said.lines if "is active on the sink cluster" in line]) == 1, said.lines
    finally:
        member.close()
