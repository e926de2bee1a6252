"""The day the DR copy is needed, on real clusters: the three-node cluster is the primary (replication 3, min ISR
2) and the sink site a one-node DR cluster. A planned promote, an unplanned failover with every source node
SIGKILLed, failback under each --diverged policy, and a drill with --dry-run on a running mirror."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import (AclBindingFilter, AclOperation, AclPermissionType, AdminClient,
                                   ResourcePatternType, ResourceType)

from streaming.brokers.broker import Broker
from streaming.brokers.local.cluster import LocalCluster
from streaming.cli.main import main
from streaming.disaster.report import EndKnown
from streaming.kafka.admin import create_topic, unique_topic_name
from streaming.kafka.headers.origin_header import ORIGIN_HEADER
from streaming.runtime.moments import HOLD_ENV, REACHED, RELEASE, Moment
from tests.cli.test_first_contact import KCOMPACT, assert_one_error, kcompact
from tests.e2e.conftest import SinkSite
from tests.e2e.helpers import (NO_SINK_COMPACTION, commit_group_offsets, group_offsets, read_topic, wait_for, winners)
from tests.e2e.running_job import RunningJob
from tests.e2e.test_security import PLAIN, SCRAM, secured  # noqa: F401 (secured: the SASL broker's fixture)
from tests.kafka_helpers import Sent, produce

pytestmark = [pytest.mark.integration, pytest.mark.slow]

PARTITIONS = 3
HOUR = 3_600_000
HELD_BACK = ("--config", "min.compaction.lag.ms=3600000")  # the records of the last hour stay in the log
# Uncompacted DR topics (NO_SINK_COMPACTION): the tests count the records the DR site holds, and the switch
# reports count them as written
WHOLE_DR_TOPIC = NO_SINK_COMPACTION


def _records(prefix: str, n: int, keys: int | None = None, age_ms: int = 0) -> list[Sent]:
    at = int(time.time() * 1000) - age_ms
    return [Sent(i % PARTITIONS, b"%s-%d" % (prefix.encode(), i if keys is None else i % keys), b"%s-v%d" % (prefix.encode(), i),
                 at + i) for i in range(n)]


def _mirror(source: str, dr: str, topic: str, state_dir: Path, *extra: str) -> None:
    """One run of the forward mirror, to the end of what the source holds, in this process on the worker's
    SparkSession (the test asks for the ``spark`` fixture): no JVM of its own to start."""
    assert main(["run", "--bootstrap-servers", source, "--source-topic", topic, "--sink-bootstrap-servers", dr,
                 "--sink-topic", topic, "--state-dir", str(state_dir), "--once", *WHOLE_DR_TOPIC, *extra]) == 0


def _report(*argv: str) -> dict:
    done = kcompact(*argv, "--json")
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def _last_per_key(bootstrap: str, topic: str) -> dict[bytes, bytes | None]:
    latest: dict[bytes, bytes | None] = {}
    for records in read_topic(bootstrap, topic, PARTITIONS).values():
        for r in records:
            latest[r["key"]] = r["value"]
    return latest


def _deny_acls(bootstrap: str) -> list:
    flt = AclBindingFilter(ResourceType.TOPIC, None, ResourcePatternType.ANY, None, None, AclOperation.WRITE,
                           AclPermissionType.DENY)
    admin = AdminClient({"bootstrap.servers": bootstrap})  # held until the answer is in
    return admin.describe_acls(flt, request_timeout=30).result(30)


def test_a_planned_promote_mirrors_to_the_cut_syncs_the_groups_and_refuses_the_old_direction(
        spark, cluster: LocalCluster, sink_site: SinkSite, tmp_path: Path) -> None:
    source, dr = cluster.bootstrap_servers, sink_site.broker.bootstrap_servers
    topic = create_topic(source, unique_topic_name("promote"), PARTITIONS, {"cleanup.policy": "compact"})
    group = unique_topic_name("app")
    sent = produce(source, topic, _records("a", 300, keys=40))
    _mirror(source, dr, topic, tmp_path / "state", "--drain")
    sent += produce(source, topic, _records("b", 200, keys=60))  # the producers go on writing after that run
    commit_group_offsets(source, group, topic, PARTITIONS, 120)
    admin_config = tmp_path / "admin.properties"
    admin_config.write_text(f"bootstrap.servers={source}\n")

    report = _report("promote", "--state-dir", str(tmp_path / "state"), "--group", group, "--fence-source-writes",
                     "--admin-config", str(admin_config))

    assert report["switch"] == "promoted" and report["rpo_records"] == 0 and report["groups_synced"]
    cut = {p["partition"]: p["source_end_offset"] for p in report["partitions"]}
    assert cut == {p: max(s.offset for s in sent if s.partition == p) + 1 for p in range(PARTITIONS)}
    assert {p["partition"]: p["last_mirrored_offset"] for p in report["partitions"]} == \
        {p: end - 1 for p, end in cut.items()}
    assert _last_per_key(dr, topic) == {s.key: s.value for p in range(PARTITIONS)
                                        for s in winners([s for s in sent if s.partition == p])}
    on_dr = read_topic(dr, topic, PARTITIONS)
    assert {r["partition"] for r in report["groups"]} == set(range(PARTITIONS))
    for row in report["groups"]:  # exact: a consumer there resumes at the first record from offset 120 on
        p = row["partition"]
        assert all(r["source_offset"] < 120 for r in on_dr[p] if r["offset"] < row["sink_offset"])
        assert all(r["source_offset"] >= 120 for r in on_dr[p] if r["offset"] >= row["sink_offset"])
        assert row["source_committed"] == 120 and row["unseen_records"] == 0
    assert group_offsets(dr, group, topic, PARTITIONS) == {r["partition"]: r["sink_offset"] for r in report["groups"]}
    assert sorted(b.name for b in _deny_acls(source) if b.name == topic) == [topic]

    again = kcompact("run", "--bootstrap-servers", source, "--source-topic", topic, "--sink-bootstrap-servers", dr,
                     "--sink-topic", topic, "--state-dir", str(tmp_path / "state"), "--once")
    assert_one_error(again, "was promoted", "--force")
    second = kcompact("promote", "--state-dir", str(tmp_path / "state"))
    assert second.returncode == 0 and second.stdout.startswith("already promoted"), second.stderr[-2000:]


def test_an_unplanned_failover_with_every_source_node_killed_reports_the_exact_rpo(
        spark, cluster: LocalCluster, sink_site: SinkSite, tmp_path: Path) -> None:
    source, dr = cluster.bootstrap_servers, sink_site.broker.bootstrap_servers
    topic = create_topic(source, unique_topic_name("failover"), PARTITIONS, {"cleanup.policy": "compact"})
    group = unique_topic_name("app")
    mirrored = produce(source, topic, _records("old", 240, age_ms=2 * HOUR))
    commit_group_offsets(source, group, topic, PARTITIONS, 30)
    _mirror(source, dr, topic, tmp_path / "state", "--drain", "--sync-group-offsets", group)
    with RunningJob(source, topic, topic, tmp_path, HELD_BACK[1], extra=("--sink-bootstrap-servers", dr),
                    sink_config=WHOLE_DR_TOPIC) as job:
        held = produce(source, topic, _records("new", 90))  # ingested, held back by min.compaction.lag.ms: the RPO
        wait_for(lambda: job.progress().logged == len(mirrored) + len(held), 120, "the job ingests the new records")
        for node in cluster.running():
            cluster.kill(node)  # mid-stream: the job still runs, and waits for the source
        job.stop()
    try:
        report = _report("failover", "--state-dir", str(tmp_path / "state"), "--source-timeout", "3", "--group",
                         group)
    finally:
        cluster.start()  # every node together: one alone has no quorum to start with

    assert report["switch"] == "failed over" and not report["source_answered"]
    on_dr = read_topic(dr, topic, PARTITIONS)
    for row in report["partitions"]:
        p = row["partition"]
        assert row["last_mirrored_offset"] == on_dr[p][-1]["source_offset"] == \
            max(s.offset for s in mirrored if s.partition == p)
        assert row["source_end"] == EndKnown.LAST_KNOWN.value
        assert row["rpo_records"] == sum(1 for s in held if s.partition == p and s.offset > row["last_mirrored_offset"])
    assert report["rpo_records"] == len(held)
    synced = group_offsets(dr, group, topic, PARTITIONS)
    for row in report["groups"]:
        p = row["partition"]
        assert row["sink_offset"] == synced[p]
        seen = [r["source_offset"] for r in on_dr[p] if r["offset"] >= synced[p]]
        assert seen == [s.offset for s in mirrored if s.partition == p and s.offset >= 30]
        missed = [s.offset for s in held if s.partition == p]
        assert row["unseen_records"] == len(missed) == report["partitions"][p]["rpo_records"]
    assert (tmp_path / "state" / "switch.json").exists()


def test_a_failover_beside_a_job_whose_state_is_on_an_object_store_stops_the_job_at_its_next_trigger(
        cluster: LocalCluster, sink_site: SinkSite, s3_server, tmp_path: Path) -> None:
    """An object store's state dir has no lock to keep a switch from running beside the job: the job finds the
    mark before its next compaction stage, emits nothing more and stops in one line."""
    source, dr = cluster.bootstrap_servers, sink_site.broker.bootstrap_servers
    topic = create_topic(source, unique_topic_name("beside"), PARTITIONS, {"cleanup.policy": "compact"})
    sent = produce(source, topic, _records("a", 90, age_ms=2 * HOUR))
    state = s3_server.uri(s3_server.new_bucket())
    with RunningJob(source, topic, topic, tmp_path, "max.compaction.lag.ms=1000", state_dir=state,
                    extra=("--sink-bootstrap-servers", dr, "--checkpoint-location", str(tmp_path / "checkpoint")),
                    sink_config=WHOLE_DR_TOPIC) as job:
        wait_for(lambda: sum(len(r) for r in read_topic(dr, topic, PARTITIONS).values()) == len(sent), 180,
                 "every record at the DR site")
        report = _report("failover", "--state-dir", state, "--source-timeout", "5")
        code = job.process.wait(60)
        errors = [line for line in job.log().splitlines() if line.startswith("kcompact: error: ")]
    assert code == 2 and len(errors) == 1 and "was failed over at" in errors[0] and "while it ran" in errors[0], errors
    assert "Traceback" not in job.log()
    assert report["rpo_records"] == 0
    produce(source, topic, _records("b", 30, age_ms=2 * HOUR))
    again = kcompact("run", "--bootstrap-servers", source, "--source-topic", topic, "--sink-bootstrap-servers", dr,
                     "--sink-topic", topic, "--state-dir", state, "--once")
    assert_one_error(again, "was failed over", "--force")
    assert sum(len(r) for r in read_topic(dr, topic, PARTITIONS).values()) == len(sent)


@pytest.mark.parametrize("policy", ["drop", "keep"])
def test_failback_settles_the_diverged_tail_by_the_policy_and_moves_the_groups_back(
        spark, cluster: LocalCluster, sink_site: SinkSite, tmp_path: Path, policy: str) -> None:
    source, dr = cluster.bootstrap_servers, sink_site.broker.bootstrap_servers
    topic = create_topic(source, unique_topic_name("failback"), PARTITIONS, {"cleanup.policy": "compact"})
    group = unique_topic_name("app")
    sent = produce(source, topic, _records("k", 120, keys=30))
    _mirror(source, dr, topic, tmp_path / "state", "--drain")
    report = _report("failover", "--state-dir", str(tmp_path / "state"))
    assert report["rpo_records"] == 0
    dr_before = {p: len(r) for p, r in read_topic(dr, topic, PARTITIONS).items()}

    now = int(time.time() * 1000)
    at_dr = produce(dr, topic, [Sent(p, b"k-%d" % k, b"dr-%d" % k, now) for k, p in ((0, 0), (1, 1), (2, 2), (3, 0))]
                    + [Sent(1, b"dr-only", b"x", now)])
    commit_group_offsets(dr, group, topic, PARTITIONS, 5)  # consumers moved to the DR site and read a little
    tail = produce(source, topic, [Sent(p, b"k-%d" % k, b"tail-%d" % k, now) for k, p in ((1, 1), (4, 1), (5, 2), (6, 0))]
                   + [Sent(2, b"tail-only", b"y", now)])

    done = kcompact("failback", "--state-dir", str(tmp_path / "state"), "--reverse-state-dir", str(tmp_path / "back"),
                    "--diverged", policy, "--export-topic-template", "{topic}.diverged", "--group", group, "--json")
    assert done.returncode == 0, done.stderr[-3000:]
    back = json.loads(done.stdout)

    assert {p["partition"]: p["records"] for p in back["partitions"]} == \
        {p: sum(1 for s in tail if s.partition == p) for p in range(PARTITIONS)}
    exported = read_topic(dr, f"{topic}.diverged", PARTITIONS)
    assert sorted((r["key"], r["value"]) for rs in exported.values() for r in rs) == \
        sorted((s.key, s.value) for s in tail)
    primary, dr_now = _last_per_key(source, topic), _last_per_key(dr, topic)
    only_tail = {s.key for s in tail} - {s.key for s in at_dr}
    for key in set(primary) | set(dr_now):
        if policy == "keep" and key in only_tail:
            assert primary[key] == next(s.value for s in reversed(tail) if s.key == key)
        else:
            assert primary.get(key) == dr_now.get(key), key
    # no record crosses twice: the DR site holds what it held and its own writes; the primary got each DR write once
    assert {p: len(r) for p, r in read_topic(dr, topic, PARTITIONS).items()} == \
        {p: dr_before[p] + sum(1 for s in at_dr if s.partition == p) for p in range(PARTITIONS)}
    admin = AdminClient({"bootstrap.servers": dr})
    dr_id = admin.describe_cluster(request_timeout=30).result(30).cluster_id.encode()
    from_dr = [(r["key"], r["value"]) for rs in read_topic(source, topic, PARTITIONS).values() for r in rs
               if (ORIGIN_HEADER, dr_id) in r["headers"] and r["source_offset"] is not None]
    assert sorted(from_dr) == sorted((s.key, s.value) for s in at_dr)
    moved = group_offsets(source, group, topic, PARTITIONS)
    dr_records = read_topic(dr, topic, PARTITIONS)
    for p in range(PARTITIONS):  # DR offset 5 is a record the forward mirror wrote: the same record on the primary
        at_5 = next(r for r in dr_records[p] if r["offset"] >= 5)
        assert moved[p] == at_5["source_offset"], p
        assert next(s.value for s in sent if s.partition == p and s.offset == moved[p]) == at_5["value"]

    again = kcompact("failback", "--state-dir", str(tmp_path / "state"), "--reverse-state-dir", str(tmp_path / "back"),
                     "--diverged", policy, "--export-topic-template", "{topic}.diverged", "--group", group)
    assert again.returncode == 0, again.stderr[-3000:]
    assert sum(len(r) for r in read_topic(dr, f"{topic}.diverged", PARTITIONS).values()) == len(tail)
    status = kcompact("status", "--state-dir", str(tmp_path / "back"))
    assert "caught up" in status.stdout.splitlines()[1], status.stdout


def test_a_dry_run_drill_on_a_running_mirror_changes_nothing(
        cluster: LocalCluster, sink_site: SinkSite, tmp_path: Path) -> None:
    source, dr = cluster.bootstrap_servers, sink_site.broker.bootstrap_servers
    topic = create_topic(source, unique_topic_name("drill"), PARTITIONS, {"cleanup.policy": "compact"})
    group = unique_topic_name("app")
    produce(source, topic, _records("a", 150, age_ms=2 * HOUR))
    commit_group_offsets(source, group, topic, PARTITIONS, 10)
    admin_config = tmp_path / "admin.properties"
    admin_config.write_text(f"bootstrap.servers={source}\n")
    state = tmp_path / "state"
    with RunningJob(source, topic, topic, tmp_path, "max.compaction.lag.ms=1000",
                    extra=("--sink-bootstrap-servers", dr), sink_config=WHOLE_DR_TOPIC) as job:
        mark = job.progressed_beyond(job.progress())
        spec = (state / "kcompact.json").read_bytes()
        for command in (("promote", "--fence-source-writes", "--admin-config", str(admin_config)), ("failover",)):
            report = _report(*command, "--state-dir", str(state), "--group", group, "--dry-run")
            assert report["dry_run"] and report["source_answered"]
        produce(source, topic, _records("b", 60, age_ms=HOUR))
        job.progressed_beyond(mark)
        assert not (state / "switch.json").exists() and (state / "kcompact.json").read_bytes() == spec
        assert group_offsets(dr, group, topic, PARTITIONS) == {}
        assert not [b for b in _deny_acls(source) if b.name == topic]
        job.running()



def _cluster_id(bootstrap: str) -> bytes:
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept: a client collected mid-call fails the call
    return admin.describe_cluster(request_timeout=30).result(30).cluster_id.encode()


def _open_transaction(bootstrap: str, topic: str, records: list[Sent]) -> Producer:
    """A transactional producer with ``records`` written and its transaction left open (flushed, not committed)."""
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": unique_topic_name("open-txn")})
    producer.init_transactions(30)
    producer.begin_transaction()
    for r in records:
        producer.produce(topic, key=r.key, value=r.value, partition=r.partition, timestamp=r.timestamp)
    assert producer.flush(30) == 0
    return producer


def test_a_promote_cuts_after_the_transactions_open_on_the_source_and_counts_those_left_open(
        spark, cluster: LocalCluster, sink_site: SinkSite, tmp_path: Path) -> None:
    """A source transaction open at the promote can commit after the DENY WRITE fence (its EndTxn is no write
    to the topic). One that ends while the promote waits comes before the cut and is mirrored; one still open
    when the wait runs out is counted in the report; neither is both unmirrored and uncounted."""
    source, dr = cluster.bootstrap_servers, sink_site.broker.bootstrap_servers
    topic = create_topic(source, unique_topic_name("open-txn"), PARTITIONS, {"cleanup.policy": "compact"})
    produce(source, topic, _records("a", 60, age_ms=2 * HOUR))
    state = tmp_path / "state"
    _mirror(source, dr, topic, state, "--drain")
    now = int(time.time() * 1000)
    ending = [Sent(p, b"ends-%d" % i, b"e%d" % i, now) for i, p in enumerate([0, 2] * 10)]
    left = [Sent(1, b"left-%d" % i, b"l%d" % i, now) for i in range(10)]
    ends_in_the_wait, left_open = _open_transaction(source, topic, ending), _open_transaction(source, topic, left)
    admin_config = tmp_path / "admin.properties"
    admin_config.write_text(f"bootstrap.servers={source}\n")
    hold = tmp_path / "hold"
    hold.mkdir()
    promote = subprocess.Popen([*KCOMPACT, "promote", "--state-dir", str(state), "--fence-source-writes",
                                "--admin-config", str(admin_config), "--open-transactions-timeout", "1", "--json"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env={**os.environ, HOLD_ENV: f"{Moment.OPEN_TRANSACTIONS.value}:{hold}"})
    try:
        wait_for(lambda: (hold / REACHED).exists() or promote.poll() is not None, 120,
                 "the promote finds the transactions open")
        ends_in_the_wait.commit_transaction(30)  # after the fence
        (hold / RELEASE).touch()
        out, err = promote.communicate(timeout=300)
    finally:
        if promote.poll() is None:
            promote.kill()
    left_open.commit_transaction(30)  # after the promote: past everything it mirrored
    assert promote.returncode == 0, err[-3000:]
    report = json.loads(out)

    at_dr = {r["key"] for rs in read_topic(dr, topic, PARTITIONS).values() for r in rs}
    assert {s.key for s in ending} <= at_dr, "the transaction that ended in the wait is mirrored"
    assert not {s.key for s in left} & at_dr
    rows = {row["partition"]: row for row in report["partitions"]}
    assert report["rpo_records"] == 0 and report["open_records"] == len(left)
    assert (rows[1]["open_records"], rows[0]["open_records"], rows[2]["open_records"]) == (len(left), 0, 0)
    assert "in transactions still open" in report["summary"]


def test_a_switch_leaves_out_of_the_rpo_the_records_that_came_from_the_dr_site(
        spark, cluster: LocalCluster, sink_site: SinkSite, tmp_path: Path) -> None:
    """Records on the source that name the DR site's cluster as their origin (a reverse mirror's, a two-way
    mirror's) are held there already: they are no part of the RPO."""
    source, dr = cluster.bootstrap_servers, sink_site.broker.bootstrap_servers
    topic = create_topic(source, unique_topic_name("from-dr"), PARTITIONS, {"cleanup.policy": "compact"})
    produce(source, topic, _records("a", 60, age_ms=2 * HOUR))
    _mirror(source, dr, topic, tmp_path / "state", "--drain")
    now, dr_id = int(time.time() * 1000), _cluster_id(dr)
    produce(source, topic, [Sent(i % PARTITIONS, b"dr-%d" % i, b"d", now, [(ORIGIN_HEADER, dr_id)]) for i in range(12)])
    own = produce(source, topic, _records("own", 5))

    for command in ("failover", "promote"):
        report = _report(command, "--state-dir", str(tmp_path / "state"), "--dry-run")
        assert report["source_answered"]
        assert {row["partition"]: row["rpo_records"] for row in report["partitions"]} == \
            {p: sum(1 for s in own if s.partition == p) for p in range(PARTITIONS)}, command


def test_a_failover_refused_by_the_source_says_so_in_one_line_and_switches_nothing(
        secured: Broker, tmp_path: Path) -> None:  # noqa: F811 (the fixture imported above)
    """Only a source that does not answer reads as gone (the report goes on with the job's last knowledge and
    skips the last group sync); one that refuses the login is an error, and nothing is marked."""
    topic = create_topic(secured.bootstrap_servers, unique_topic_name("refused"), 1, {"cleanup.policy": "compact"})
    produce(secured.bootstrap_servers, topic, [Sent(0, b"k%d" % i, b"v", int(time.time() * 1000) - 2 * HOUR + i)
                                               for i in range(5)])
    state = tmp_path / "state"
    login = [a for s in PLAIN for a in ("--kafka", s)]
    done = kcompact("run", "--bootstrap-servers", secured.sasl_bootstrap_servers, "--source-topic", topic,
                    "--sink-bootstrap-servers", secured.bootstrap_servers, "--sink-topic", f"{topic}.dr",
                    "--state-dir", str(state), "--once", "--drain", *WHOLE_DR_TOPIC, *login)
    assert done.returncode == 0, done.stderr[-3000:]

    refused = kcompact("failover", "--state-dir", str(state), "--source-timeout", "5",
                       *[a for s in SCRAM for a in ("--kafka", s)])
    assert_one_error(refused, "refused", "SASL authentication")
    assert not (state / "switch.json").exists()
    answered = _report("failover", "--state-dir", str(state), "--dry-run", *login)
    assert answered["source_answered"] and answered["rpo_records"] == 0
