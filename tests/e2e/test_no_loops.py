"""Two mirrors in opposite directions between two clusters, with the same topic names on both (a reverse mirror
for failback, or a mirror each way): each run --once in turn, with records written on both sides. Every record
crosses at most once and carries its origin cluster's id; nothing loops (the topics stop growing); and a key
written on both sides ends with the value that crossed last on both, never an older value sent over a newer
one (a looped record still wins its key in the log before it is left out)."""

from __future__ import annotations

import time

import pytest

from streaming.cli.main import main
from streaming.kafka.admin import Cluster, create_topic, unique_topic_name
from streaming.kafka.headers.origin_header import ORIGIN_HEADER
from tests.e2e.helpers import NO_SINK_COMPACTION, read_topic
from tests.kafka_helpers import Sent, produce

pytestmark = pytest.mark.integration

PARTITIONS = 2
PAST = int(time.time() * 1000) - 3_600_000  # old enough to be cleaned and emitted at once


def _records(prefix: bytes, keys: range) -> list[Sent]:
    return [Sent(i % PARTITIONS, b"%s%d" % (prefix, i), b"%s-value-%d" % (prefix, i), PAST + i) for i in keys]


def _mirror(source: str, sink: str, topic: str, state_dir: str) -> None:
    """One run, in this process on the worker's SparkSession (the ``spark`` fixture): no JVM of its own to start."""
    # an uncompacted sink (NO_SINK_COMPACTION): every record's origin, as written
    assert main(["run", "--bootstrap-servers", source, "--source-topic", topic, "--sink-bootstrap-servers", sink,
                 "--sink-topic-template", "{topic}", "--state-dir", state_dir, "--once", "--drain",
                 *NO_SINK_COMPACTION]) == 0


def _topic(bootstrap: str, topic: str) -> list[dict]:
    return [r for records in read_topic(bootstrap, topic, PARTITIONS).values() for r in records]


def _origins(records: list[dict]) -> dict[bytes, bytes | None]:
    """Each record's origin header by key (None: written there); a key twice is a record that crossed twice."""
    out: dict[bytes, bytes | None] = {}
    for r in records:
        origin = [v for k, v in r["headers"] if k == ORIGIN_HEADER]
        out[r["key"] + b"@" + r["value"]] = origin[0] if origin else None
    return out


def test_two_mirrors_in_opposite_directions_copy_each_record_once_and_never_loop(spark, cluster, sink_site,
                                                                                tmp_path) -> None:
    a, b = cluster.bootstrap_servers, sink_site.broker.bootstrap_servers
    a_id, b_id = Cluster("source", a).cluster_id().encode(), Cluster("sink", b).cluster_id().encode()
    topic = unique_topic_name("both-ways")
    for side in (a, b):
        create_topic(side, topic, PARTITIONS, {"retention.ms": "-1"})
    produce(a, topic, [*_records(b"a", range(10)), Sent(0, b"both", b"older-on-a", PAST + 100)])
    produce(b, topic, [*_records(b"b", range(10)), Sent(0, b"both", b"newer-on-b", PAST + 200)])
    a_to_b, b_to_a = str(tmp_path / "a-to-b"), str(tmp_path / "b-to-a")

    _mirror(b, a, topic, b_to_a)  # b's "both" reaches a first: a's own value is then superseded in a's log
    _mirror(a, b, topic, a_to_b)
    produce(a, topic, _records(b"a", range(10, 15)))
    produce(b, topic, _records(b"b", range(10, 15)))
    for _ in range(2):
        _mirror(b, a, topic, b_to_a)
        _mirror(a, b, topic, a_to_b)
    on_a, on_b = _topic(a, topic), _topic(b, topic)
    sizes = (len(on_a), len(on_b))
    _mirror(a, b, topic, a_to_b)
    _mirror(b, a, topic, b_to_a)
    on_a, on_b = _topic(a, topic), _topic(b, topic)
    assert (len(on_a), len(on_b)) == sizes, "nothing loops: a round with nothing new written copies nothing"

    local_a = {b"a%d@a-value-%d" % (i, i) for i in range(15)} | {b"both@older-on-a"}
    local_b = {b"b%d@b-value-%d" % (i, i) for i in range(15)} | {b"both@newer-on-b"}
    want_a = {**{k: None for k in local_a}, **{k: b_id for k in local_b}}
    want_b = {**{k: None for k in local_b}, **{k: a_id for k in local_a - {b"both@older-on-a"}}}
    assert _origins(on_a) == want_a and len(on_a) == len(want_a), "b's records crossed once, each naming b"
    assert _origins(on_b) == want_b and len(on_b) == len(want_b), \
        "a's records crossed once naming a; a's older 'both' never went over b's newer one"
    for records in (on_a, on_b):
        assert [r["value"] for r in records if r["key"] == b"both"][-1] == b"newer-on-b"
