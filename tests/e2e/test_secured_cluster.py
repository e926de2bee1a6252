"""A job on a production-shaped cluster: TLS, SCRAM-SHA-512 or a client certificate, and ACLs enforced.

The job runs as a principal holding exactly the least ACL set (streaming.kafka.access.permissions), end to end, with
its password in a file that nothing the job writes or starts ever shows. Each ACL of the set is then taken
away in turn: the job refuses in one line naming it, before anything is created. Runs on the three-node
cluster of the session, and on the session's own broker (the project's Kafka image where an engine answers).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.request
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pytest
from confluent_kafka import Consumer, KafkaException, TopicCollection, TopicPartition
from confluent_kafka.admin import AdminClient

from streaming.brokers.broker import Broker, SecureAccess
from streaming.brokers.choice import start_local_broker
from streaming.brokers.local.server import free_port
from streaming.cli.main import main
from streaming.kafka.access.acl_sync import sink_grants
from streaming.kafka.access.acls import Grant, Pattern, Resource, add_grants, grants_of, upsert_scram_user
from streaming.kafka.admin import create_topic, unique_topic_name
from streaming.kafka.access.permissions import JobAccess, required_grants
from streaming.runtime.moments import HOLD_ENV, REACHED, RELEASE, Moment
from tests.e2e.helpers import NO_SINK_COMPACTION, group_offsets, read_topic, sent_view, sink_view, wait_for, winners
from tests.kafka_helpers import Sent, produce

pytestmark = pytest.mark.integration

PAST = int(time.time() * 1000) - 7_200_000  # records old enough that max.compaction.lag.ms has them emitted
# an uncompacted sink (NO_SINK_COMPACTION): the sink's every record against the winners, in order
EMIT_NOW = ["--config", "max.compaction.lag.ms=60000", *NO_SINK_COMPACTION]


@pytest.fixture(params=["cluster", "broker"])
def secured(request: pytest.FixtureRequest) -> Iterator[Broker]:
    """The session's three-node cluster, or its single broker (a container of the project's image where an
    engine answers); under an external cluster whose listeners the tests cannot know, a local broker."""
    if request.param == "cluster":
        yield request.getfixturevalue("cluster_broker")
        return
    broker = request.getfixturevalue("kafka_broker")
    if broker.secure is not None:
        yield broker
        return
    with start_local_broker() as local:
        yield local


@dataclass(frozen=True)
class Principal:
    """A SCRAM user whose password lives only in a file of its own (0600)."""

    name: str
    password: str
    secrets_file: Path

    @property
    def principal(self) -> str:
        return f"User:{self.name}"

    def settings(self, secure: SecureAccess) -> dict[str, str]:
        """For kcompact: the password as a reference to its file."""
        return secure.scram(self.name, f"${{file:{self.secrets_file}:sasl.password}}")

    def client(self, secure: SecureAccess) -> dict[str, str]:
        """For a plain confluent-kafka client of the test's."""
        return {"bootstrap.servers": secure.sasl_ssl_bootstrap_servers, **secure.scram(self.name, self.password)}


def _principal(broker: Broker, tmp_path: Path, role: str) -> Principal:
    name = f"{role}-{uuid.uuid4().hex[:8]}"
    password = f"pw-{uuid.uuid4().hex}"
    secrets = tmp_path / f"{name}.properties"
    secrets.write_text(f"sasl.password={password}\n")
    secrets.chmod(0o600)
    upsert_scram_user(broker.bootstrap_servers, name, password)
    return Principal(name, password, secrets)


def _config_file(tmp_path: Path, bootstrap: str, settings: dict[str, str]) -> Path:
    path = tmp_path / "job.properties"
    path.write_text(f"bootstrap.servers={bootstrap}\n" + "".join(f"kafka.{k}={v}\n" for k, v in settings.items()))
    return path


def _topics(broker: Broker) -> set[str]:
    """The cluster's topics but Kafka's own (__transaction_state appears when a fresh cluster first sees a
    transactional id: the broker's doing, and what any transactional client's first call does)."""
    plain = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    return {t for t in plain.list_topics(timeout=30).topics if not t.startswith("__")}


def _secret_in_processes(secret: str, job_pid: int) -> list[str]:
    """Where the secret shows in /proc: every process's command line, and the job's processes' environment."""
    found = []
    family = {job_pid}
    for pid in sorted(int(p) for p in os.listdir("/proc") if p.isdigit()):
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
            if int(stat.rsplit(")", 1)[1].split()[1]) in family:
                family.add(pid)
            if secret.encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                found.append(f"cmdline of {pid}")
        except (OSError, ValueError, IndexError):
            continue
    for pid in family:
        try:
            if secret.encode() in Path(f"/proc/{pid}/environ").read_bytes():
                found.append(f"environment of {pid}")
        except OSError:
            continue
    return found


def _commit_group(bootstrap: str, group: str, topic: str, offsets: dict[int, int]) -> None:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    consumer.commit(offsets=[TopicPartition(topic, p, o) for p, o in offsets.items()], asynchronous=False)
    consumer.close()


def test_a_job_holding_exactly_the_least_acl_set_mirrors_over_sasl_ssl_and_its_password_is_written_nowhere(
        secured: Broker, tmp_path) -> None:
    admin = secured.bootstrap_servers
    job = _principal(secured, tmp_path, "job")
    src = create_topic(admin, unique_topic_name("secure-src"), 2, {"retention.ms": "-1"})
    sink, dead_letter, group = unique_topic_name("secure-sink"), unique_topic_name("secure-dlq"), f"app-{uuid.uuid4().hex[:8]}"
    sent = produce(admin, src, [Sent(i % 2, b"k%d" % (i % 7), b"v%d" % i, PAST + i) for i in range(60)]
                   + [Sent(0, None, b"keyless", PAST + 100)])
    _commit_group(admin, group, src, {0: 10, 1: 12})
    access = JobAccess((src,), (sink,), dead_letter, (group,), one_cluster=True)
    add_grants(admin, [g for _, g in required_grants(access, job.principal, job.principal)])
    config = _config_file(tmp_path, secured.secure.sasl_ssl_bootstrap_servers, job.settings(secured.secure))
    state, hold, port = tmp_path / "state", tmp_path / "hold", free_port()
    hold.mkdir()
    command = [sys.executable, "-m", "streaming", "--log-level", "DEBUG", "run", "--config-file", str(config),
               "--source-topic", src, "--sink-topic", sink, "--state-dir", str(state), "--once",
               "--dead-letter-topic", dead_letter, "--config", "compaction.keyless.policy=dead-letter",
               "--sync-group-offsets", group, "--metrics-port", str(port), "--metrics-host", "127.0.0.1", *EMIT_NOW]
    log = tmp_path / "job.log"
    with open(log, "w") as out:
        run = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT,
                               env={**os.environ, HOLD_ENV: f"{Moment.FLUSH.value}:{hold}"})
        try:
            wait_for(lambda: (hold / REACHED).exists() or run.poll() is not None, 300, "the job's first flush")
            assert run.poll() is None, log.read_text()[-3000:]
            # every process the job started is up now: the driver, Spark's JVM, its Python workers
            assert _secret_in_processes(job.password, run.pid) == []
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
                assert answer.status == 200 and job.password.encode() not in answer.read()
            (hold / RELEASE).touch()
            assert run.wait(300) == 0, log.read_text()[-3000:]
        finally:
            if run.poll() is None:
                run.kill()
    got = read_topic(admin, sink, 2)
    for p in range(2):
        assert sink_view(got[p]) == sent_view(winners([s for s in sent if s.partition == p and s.key is not None]))
    assert [r["value"] for rs in read_topic(admin, dead_letter, 2).values() for r in rs] == [b"keyless"]
    assert set(group_offsets(admin, group, sink, 2)) == {0, 1}

    assert job.password not in log.read_text()
    for command in (["--log-level", "DEBUG", "run", "--config-file", str(config), "--source-topic", src,
                     "--sink-topic", sink, "--state-dir", str(state), "--print-config"],
                    ["status", "--state-dir", str(state)], ["status", "--state-dir", str(state), "--json"]):
        shown = subprocess.run([sys.executable, "-m", "streaming", *command], capture_output=True, text=True,
                               timeout=120)
        assert shown.returncode == 0, shown.stderr
        assert job.password not in shown.stdout + shown.stderr
    # the state dir (the Spark checkpoint in it too) holds no password, and only its owner may enter it
    for root, _, files in os.walk(state):
        assert os.stat(root).st_mode & 0o077 == 0, f"{root} is open to others"
        for name in files:
            path = os.path.join(root, name)
            assert os.stat(path).st_mode & 0o077 == 0, f"{path} is open to others"
            with open(path, "rb") as f:
                assert job.password.encode() not in f.read(), f"{path} holds the password"


@dataclass(frozen=True)
class Removal:
    """One ACL of the least set taken away: which side, operation and resource, by role."""

    side: str
    operation: str
    role: str  # "source", "sink", "dead-letter", "transactional-id", "group", "cluster"

    def of(self, grants: list[tuple[str, Grant]], names: dict[str, str]) -> Grant:
        kind = {"transactional-id": Resource.TRANSACTIONAL_ID, "group": Resource.GROUP,
                "cluster": Resource.CLUSTER}.get(self.role, Resource.TOPIC)
        return next(g for side, g in grants if side == self.side and g.operation == self.operation
                    and g.resource == kind and (kind != Resource.TOPIC or g.name == names[self.role]))


REMOVALS = [Removal("source", "READ", "source"), Removal("source", "DESCRIBE_CONFIGS", "source"),
            Removal("sink", "CREATE", "sink"), Removal("sink", "ALTER", "sink"),
            Removal("sink", "WRITE", "sink"), Removal("sink", "READ", "sink"),
            Removal("sink", "WRITE", "transactional-id"),
            Removal("sink", "CREATE", "dead-letter"), Removal("sink", "WRITE", "dead-letter"),
            Removal("sink", "READ", "group"), Removal("sink", "ALTER", "cluster")]
# On one cluster, as here, READ on a group and ALTER on the cluster imply the source side's DESCRIBE on them.
# Kafka answers what a principal may do on a topic only once the topic exists: these two are judged right
# after the job creates its (empty) output topics, and before anything else.
JUDGED_AFTER_CREATION = {("sink", "WRITE", "sink"), ("sink", "READ", "sink"), ("sink", "WRITE", "dead-letter")}


@pytest.mark.parametrize("removal", REMOVALS, ids=lambda r: f"{r.side}-{r.operation}-{r.role}")
def test_each_acl_of_the_least_set_is_needed_and_its_absence_is_one_line_before_anything_is_made(
        cluster_broker: Broker, tmp_path, capsys, removal: Removal) -> None:
    b = cluster_broker
    job = _principal(b, tmp_path, "job")
    src = create_topic(b.bootstrap_servers, unique_topic_name("acl-src"), 2, {"retention.ms": "-1"})
    names = {"source": src, "sink": unique_topic_name("acl-sink"), "dead-letter": unique_topic_name("acl-dlq")}
    group = f"app-{uuid.uuid4().hex[:8]}"
    access = JobAccess((src,), (names["sink"],), names["dead-letter"], (group,), sync_acls=True, one_cluster=True)
    grants = required_grants(access, job.principal, job.principal)
    missing = removal.of(grants, names)
    add_grants(b.bootstrap_servers, [g for _, g in grants if g != missing])
    config = _config_file(tmp_path, b.secure.sasl_ssl_bootstrap_servers, job.settings(b.secure))
    before = _topics(b)
    capsys.readouterr()
    state = tmp_path / "state"
    started = time.monotonic()
    assert main(["run", "--config-file", str(config), "--source-topic", src, "--sink-topic", names["sink"],
                 "--state-dir", str(state), "--once", "--dead-letter-topic", names["dead-letter"],
                 "--sync-group-offsets", group, "--sync-topic-acls"]) == 2
    assert time.monotonic() - started < 30, "refused at once, not after a timeout"
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if line.startswith("kcompact: error:")]
    assert len(errors) == 1 and "Traceback" not in err, err
    line = errors[0]
    assert f"does not allow {job.principal} {missing.operation} on" in line, line
    assert missing.name in line or missing.resource == Resource.CLUSTER, line
    assert "grant it: kafka-acls.sh" in line and f"--allow-principal {job.principal}" in line, line
    assert not state.exists(), "nothing in the state dir"
    made = _topics(b) - before
    if (removal.side, removal.operation, removal.role) in JUDGED_AFTER_CREATION:
        assert made <= {names["sink"], names["dead-letter"]}
        for topic in made:
            assert all(not records for records in read_topic(b.bootstrap_servers, topic, 2).values())
    else:
        assert made == set(), made
        assert len(err.strip().splitlines()) == 1, err


@pytest.mark.parametrize("case", ["untrusted certificate", "wrong password", "no client certificate"])
def test_a_tls_or_login_refusal_is_one_line_naming_what_to_check(secured: Broker, tmp_path, capsys, case: str) -> None:
    s = secured.secure
    wrong = tmp_path / "wrong.properties"
    wrong.write_text("sasl.password=not-the-password\n")
    bootstrap, settings, said = {
        "untrusted certificate": (s.sasl_ssl_bootstrap_servers, {**s.admin(), "ssl.ca.location": ""},
                                  "the broker's certificate is not trusted"),
        "wrong password": (s.sasl_ssl_bootstrap_servers,
                           {**s.admin(), "sasl.password": f"${{file:{wrong}:sasl.password}}"},
                           "Check sasl.mechanism, sasl.username and sasl.password"),
        "no client certificate": (s.ssl_bootstrap_servers, {"security.protocol": "SSL", "ssl.ca.location": str(s.certificates.ca)},
                                  "the broker wants a client certificate"),
    }[case]
    settings = {k: v for k, v in settings.items() if v}
    config = _config_file(tmp_path, bootstrap, settings)
    capsys.readouterr()
    started = time.monotonic()
    assert main(["run", "--config-file", str(config), "--source-topic", "t", "--sink-topic", "s", "--state-dir",
                 str(tmp_path / "state"), "--once"]) == 2
    assert time.monotonic() - started < 20
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("kcompact: error: the source cluster at"), err
    assert said.lower() in err[0].lower(), err
    assert not (tmp_path / "state").exists()


def test_a_job_authenticates_with_a_client_certificate_and_copies_read_acls_to_its_sink(
        cluster_broker: Broker, tmp_path, capsys) -> None:
    b = cluster_broker
    admin, s = b.bootstrap_servers, b.secure
    job = f"User:{s.certificates.client_name}"
    src = create_topic(admin, unique_topic_name("mtls-src"), 2, {"retention.ms": "-1"})
    other = create_topic(admin, unique_topic_name("mtls-other"), 1)
    sink = unique_topic_name("mtls-sink")
    sent = produce(admin, src, [Sent(i % 2, b"k%d" % (i % 5), b"v%d" % i, PAST + i) for i in range(40)])
    reader = _principal(b, tmp_path, "reader")
    add_grants(admin, [Grant(reader.principal, "READ", Resource.TOPIC, src),
                       Grant(reader.principal, "ALL", Resource.TOPIC, src[:8], Pattern.PREFIXED),
                       Grant(reader.principal, "WRITE", Resource.TOPIC, src),
                       Grant(reader.principal, "READ", Resource.GROUP, "reader-", Pattern.PREFIXED),
                       Grant(reader.principal, "READ", Resource.TOPIC, other)])
    access = JobAccess((src,), (sink,), sync_acls=True, one_cluster=True)
    add_grants(admin, [g for _, g in required_grants(access, job, job)])
    config = _config_file(tmp_path, s.ssl_bootstrap_servers, s.mtls())
    state = tmp_path / "state"
    assert main(["run", "--config-file", str(config), "--source-topic", src, "--sink-topic", sink, "--state-dir",
                 str(state), "--once", "--sync-topic-acls", *EMIT_NOW]) == 0
    got = read_topic(admin, sink, 2)
    for p in range(2):
        assert sink_view(got[p]) == sent_view(winners([x for x in sent if x.partition == p]))

    def on_sink() -> set[Grant]:
        return {g for g in grants_of(admin) if g.name == sink and g.principal == reader.principal}

    # an ACL the controller took is listed by each broker once its metadata has caught up
    wait_for(on_sink, 30, "the copied ACLs listed by the cluster")
    assert on_sink() == {Grant(reader.principal, "READ", Resource.TOPIC, sink)}, "READ and ALL as READ; WRITE never"
    consumer = Consumer({**reader.client(s), "group.id": f"reader-{uuid.uuid4().hex[:6]}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(sink, 0, 0)])
        read = wait_for(lambda: [m for m in consumer.consume(50, timeout=1) if m.error() is None], 60,
                        "the reader reads the sink")
        assert read
    finally:
        consumer.close()
    unrelated = create_topic(admin, unique_topic_name("mtls-unrelated"), 1)
    as_reader = AdminClient(reader.client(s))
    allowed = as_reader.describe_topics(TopicCollection([sink]), include_authorized_operations=True)[sink]
    assert "READ" in [op.name for op in allowed.result(30).authorized_operations]
    with pytest.raises(KafkaException, match="TOPIC_AUTHORIZATION_FAILED"):
        as_reader.describe_topics(TopicCollection([unrelated]))[unrelated].result(30)

    # a new ACL on the source: the dry run names it and adds nothing; the sync then adds it
    viewer = f"User:viewer-{uuid.uuid4().hex[:6]}"
    add_grants(admin, [Grant(viewer, "DESCRIBE", Resource.TOPIC, src)])
    capsys.readouterr()
    # as an admin apart from the job (its Java client properties, as kafka-acls.sh takes them), from cron
    admin_config = s.write_client_files().admin_command
    sync = ["sync-acls", "--state-dir", str(state), "--admin-config", str(admin_config)]
    assert main([*sync, "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "would add" in out and f"--allow-principal {viewer} --operation Describe --topic '{sink}'" in out, out
    assert f"--command-config {admin_config} " in out and f"--allow-principal {job} " not in out, out
    assert Grant(viewer, "DESCRIBE", Resource.TOPIC, sink) not in set(grants_of(admin))
    assert main(sync) == 0
    copied = sink_grants([Grant(viewer, "DESCRIBE", Resource.TOPIC, src)], {src: sink})[0]
    assert copied == Grant(viewer, "DESCRIBE", Resource.TOPIC, sink)
    wait_for(lambda: copied in set(grants_of(admin)), 30, "the ACL the sync added, listed by the cluster")

