"""`kcompact broker`: --secure says how to reach its secured listeners, and what it says works (each
--config-file it writes logs in, SCRAM over TLS or a client certificate, with the password left in its
file); three nodes say when one exits; --advertised-port puts every client behind a proxy."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from streaming.configuration import config_providers, java_properties
from streaming.configuration.client_properties import java_client_properties
from tests.cli.test_first_contact import TEXT_LINE, assert_one_error, kcompact
from tests.toxiproxy import Toxic, Toxiproxy, in_front_of_nodes, toxic

pytestmark = pytest.mark.integration


def test_broker_secure_prints_settings_whose_config_files_log_in_to_each_secured_listener(tmp_path) -> None:
    """With --user, a SCRAM user with no ACLs and its password in a 0600 file; the admin's client properties
    (Java's form) then grant that user a job's least set through --print-acls --apply, once: a second apply
    adds nothing, and the dry run's commands name the file as kafka-acls.sh's --command-config."""
    broker = subprocess.Popen([sys.executable, "-m", "streaming", "broker", "--secure", "--user", "mirror"],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        lines = []
        while not (lines and lines[-1].lstrip().startswith("user mirror")):
            line = broker.stdout.readline()
            assert line, f"kcompact broker ended: {lines}"
            lines.append(line.rstrip())
        printed = "\n".join(lines)
        assert "ssl.ca.location=" in printed and "principal User:kcompact-client" in printed
        scram = re.search(r"--config-file (\S+) \(SCRAM\)", printed).group(1)
        mtls = re.search(r"or (\S+) \(mTLS\)", printed).group(1)
        user_config = re.search(r"user mirror .*--config-file (\S+);", printed).group(1)
        password_file = re.search(r"user mirror .*password in (\S+);", printed).group(1)
        admin_config = re.search(r"--admin-config\): (\S+)", printed).group(1)
        assert os.stat(password_file).st_mode & 0o777 == 0o600 and os.stat(admin_config).st_mode & 0o777 == 0o600
        for path in (scram, mtls, user_config):
            with open(path) as f:
                settings = java_properties.load(f)
            if path != mtls:
                assert settings["kafka.sasl.password"].startswith("${file:"), "the password stays in its file"
            client = config_providers.resolve_all({k.removeprefix("kafka."): v for k, v in settings.items()})
            admin = AdminClient(client)
            assert admin.list_topics(timeout=30).brokers, path

        job = ["run", "--config-file", user_config, "--source-topic", "orders", "--sink-topic", "orders.c",
               "--state-dir", str(tmp_path / "state"), "--print-acls", "--admin-config", admin_config]
        dry = kcompact(*job)
        commands = [line for line in dry.stdout.splitlines() if line.startswith("kafka-acls.sh")]
        assert dry.returncode == 0 and commands and all(f"--command-config {admin_config} " in c for c in commands)
        assert all("--allow-principal User:mirror " in c for c in commands), dry.stdout
        first, again = kcompact(*job, "--apply"), kcompact(*job, "--apply")
        assert first.returncode == 0 and again.returncode == 0, first.stderr + again.stderr
        added = int(re.search(r"(\d+) ACLs added, 0 already there", first.stdout).group(1))
        assert added == len(commands), (first.stdout, commands)
        assert f"0 ACLs added, {added} already there" in again.stdout, again.stdout
        with open(user_config) as f:  # the user's own login, in Java's form: no admin, so no ACLs for it
            as_user = {k.removeprefix("kafka."): v for k, v in java_properties.load(f).items()}
        not_admin = tmp_path / "not-admin.properties"
        not_admin.write_text(java_properties.dumps({"bootstrap.servers": as_user["bootstrap.servers"],
                                                    **java_client_properties(config_providers.resolve_all(as_user))}))
        refused = kcompact(*job[:-1], str(not_admin), "--apply")
        assert_one_error(refused, "the admin given with --admin-config", "AUTHORIZATION_FAILED", "super user")
        assert not (tmp_path / "state").exists(), "printing and granting ACLs makes no state dir"

        produced = kcompact("produce-changes", "--config-file", scram, "--topic", "orders", "--count", "30")
        assert produced.returncode == 0 and "produced" not in produced.stderr, produced.stderr
        refused = kcompact("produce-changes", "--config-file", user_config, "--topic", "orders", "--count", "5")
        assert_one_error(refused, "producing to orders: 5 records refused", "authorization")
        wrong = tmp_path / "wrong.properties"
        with open(user_config) as f:
            wrong.write_text(java_properties.dumps({**java_properties.load(f), "kafka.sasl.password": "not-it"}))
        denied = kcompact("run", "--config-file", str(wrong), "--source-topic", "orders", "--sink-topic", "orders.c",
                          "--state-dir", str(tmp_path / "state"), "--once", "--retry-timeout", "5")
        assert_one_error(denied, "refused the compactor", f"kafka.sasl.password in {wrong}",
                         f"kafka.sasl.username in {wrong}")
        assert "--kafka" not in denied.stderr, denied.stderr
    finally:
        broker.send_signal(signal.SIGTERM)
        assert broker.wait(60) == 0


@pytest.mark.slow
def test_broker_of_three_says_when_a_node_exits_reaps_it_and_says_when_it_is_back() -> None:
    broker = subprocess.Popen([sys.executable, "-m", "streaming", "broker", "--brokers", "3"], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    try:
        first = broker.stdout.readline()
        pids = [int(p) for p in re.search(r"pids ([\d, ]+);", first).group(1).split(", ")]
        assert first.startswith("bootstrap.servers=") and len(pids) == 3, first
        os.kill(pids[1], signal.SIGKILL)
        exited = broker.stdout.readline().rstrip()
        assert exited == f"node 2 (pid {pids[1]}) exited: killed by SIGKILL; starting it again in 5s", exited
        assert not os.path.exists(f"/proc/{pids[1]}"), "the dead node's JVM is reaped, not left a zombie"
        back = broker.stdout.readline().rstrip()
        new_pid = int(re.fullmatch(r"node 2 is back \(pid (\d+)\)", back).group(1))
        assert os.path.exists(f"/proc/{new_pid}")
        admin = AdminClient({"bootstrap.servers": first.split()[0].split("=", 1)[1]})
        deadline = time.monotonic() + 90  # the node registers with the controller after it says it started
        while len(admin.list_topics(timeout=30).brokers) < 3:
            assert time.monotonic() < deadline, "the restarted node rejoins the cluster"
            time.sleep(0.5)
    finally:
        broker.send_signal(signal.SIGTERM)
        code = broker.wait(120)
    rest, err = broker.stdout.read(), broker.stderr.read()
    assert code == 0 and rest == "", (rest, err)
    assert all(TEXT_LINE.match(line) for line in err.splitlines()), err
    assert not [p for p in (*pids, new_pid) if os.path.exists(f"/proc/{p}")], "every node is stopped"


def test_broker_behind_a_proxy_sends_every_client_through_it(toxiproxy: Toxiproxy) -> None:
    """--advertised-port: a client that bootstraps anywhere is told the proxy's port, so a toxic on the proxy
    reaches it; the usage error names what is missing."""
    assert_one_error(kcompact("broker", "--advertised-port", "9999"), "--advertised-port is for one broker with --port")
    proxied, proxies = in_front_of_nodes(toxiproxy, 1, "cli-broker")
    broker = subprocess.Popen([sys.executable, "-m", "streaming", "broker", "--port", str(proxied[0].broker),
                               "--advertised-port", str(proxied[0].proxy)], stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True)
    try:
        first = broker.stdout.readline()
        assert first.startswith(f"bootstrap.servers={proxies[0].listen}  ("), first
        metadata = AdminClient({"bootstrap.servers": proxies[0].listen}).list_topics(timeout=30)
        assert [b.port for b in metadata.brokers.values()] == [proxied[0].proxy], "clients are sent to the proxy"
        with toxic(proxies, Toxic.blackhole()), pytest.raises(KafkaException):
            AdminClient({"bootstrap.servers": proxies[0].listen, "socket.timeout.ms": 2000}).list_topics(timeout=3)
    finally:
        broker.send_signal(signal.SIGTERM)
        assert broker.wait(60) == 0
