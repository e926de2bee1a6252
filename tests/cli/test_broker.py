"""`kcompact broker --secure` says how to reach its secured listeners, and what it says works: each
--config-file it writes logs in (SCRAM over TLS, a client certificate) with the password left in its file."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time

import pytest
from confluent_kafka.admin import AdminClient

from streaming import config_providers, java_properties
from tests.cli.test_first_contact import TEXT_LINE

pytestmark = pytest.mark.integration


def test_broker_secure_prints_settings_whose_config_files_log_in_to_each_secured_listener() -> None:
    broker = subprocess.Popen([sys.executable, "-m", "streaming", "broker", "--secure"], stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True)
    try:
        lines = []
        while not (lines and lines[-1].lstrip().startswith("kcompact run --config-file")):
            line = broker.stdout.readline()
            assert line, f"kcompact broker ended: {lines}"
            lines.append(line.rstrip())
        printed = "\n".join(lines)
        assert "ssl.ca.location=" in printed and "principal User:kcompact-client" in printed
        scram = re.search(r"--config-file (\S+) \(SCRAM\)", printed).group(1)
        mtls = re.search(r"or (\S+) \(mTLS\)", printed).group(1)
        for path in (scram, mtls):
            with open(path) as f:
                settings = java_properties.load(f)
            if path == scram:
                assert settings["kafka.sasl.password"].startswith("${file:"), "the password stays in its file"
            client = config_providers.resolve_all({k.removeprefix("kafka."): v for k, v in settings.items()})
            admin = AdminClient(client)
            assert admin.list_topics(timeout=30).brokers, path
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
