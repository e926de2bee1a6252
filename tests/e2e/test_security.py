"""SASL settings reach every client on both sides, a cluster that refuses us is named at once, and the
credentials show up nowhere: not in output, logs, errors, status or the state directory."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from typing import Iterator

import pytest

from streaming.cli.main import main
from streaming.kafka.admin import create_topic, unique_topic_name
from streaming.brokers.broker import Broker
from streaming.brokers.choice import start_local_broker
from streaming.state.layout import sink_ends_file
from streaming.state.stores import open_state_dir
from tests.e2e.helpers import NO_SINK_COMPACTION, assert_sink_contract, read_topic, sent_view, sink_view, winners
from tests.kafka_helpers import SASL_PASSWORD, SASL_USER, Sent, produce

pytestmark = pytest.mark.integration

SECRET = SASL_PASSWORD
# The local broker's SASL listener takes PLAIN logins of the test user and knows no SCRAM credentials: a
# cluster that accepts us and one that refuses us, both the real broker on the wire.
PLAIN = ["security.protocol=SASL_PLAINTEXT", "sasl.mechanism=PLAIN", f"sasl.username={SASL_USER}",
         f"sasl.password={SECRET}"]
SCRAM = ["security.protocol=SASL_PLAINTEXT", "sasl.mechanism=SCRAM-SHA-256", f"sasl.username={SASL_USER}",
         f"sasl.password={SECRET}"]


def _flags(option: str, settings: list[str]) -> list[str]:
    return [a for s in settings for a in (option, s)]


@pytest.fixture(scope="module")
def secured(kafka_broker: Broker) -> Iterator[Broker]:
    """A broker whose SASL_PLAINTEXT listener takes the test user's PLAIN login: the session's own (the local
    broker and the container broker have one), else, under an external cluster whose listeners the tests
    cannot know, a local Apache Kafka of this module's, so the security tests run in every configuration."""
    if kafka_broker.sasl_bootstrap_servers is not None:
        yield kafka_broker
        return
    with start_local_broker(sasl_users={SASL_USER: SASL_PASSWORD}) as broker:
        yield broker


def _topic(broker: Broker, partitions: int) -> str:
    return create_topic(broker.bootstrap_servers, unique_topic_name("secured"), partitions, {"retention.ms": "-1"})


@pytest.mark.parametrize("side", ["source", "sink"])
def test_a_cluster_that_refuses_our_credentials_is_named_at_once(secured: Broker, tmp_path,
                                                                 capsys, side: str) -> None:
    sasl_bootstrap_servers = secured.sasl_bootstrap_servers
    src = _topic(secured, 1)
    # the side under test logs in with SCRAM; the other one with PLAIN, which the listener accepts
    security = (_flags("--kafka", SCRAM) if side == "source"
                else _flags("--kafka", PLAIN) + _flags("--sink-kafka", SCRAM))
    capsys.readouterr()
    started = time.monotonic()
    assert main(["run", "--bootstrap-servers", sasl_bootstrap_servers, "--source-topic", src, "--sink-topic",
                 unique_topic_name("sink"), "--state-dir", str(tmp_path), "--once", *security]) == 2
    out, err = capsys.readouterr()
    assert f"the {side} cluster at {sasl_bootstrap_servers} refused the compactor" in err, err
    assert "SASL authentication error" in err
    assert ("--kafka" if side == "source" else "--sink-kafka") in err
    assert time.monotonic() - started < 20, "named at once, not after a metadata timeout"
    assert SECRET not in out + err


def test_sasl_settings_reach_every_client_and_credentials_never_show(secured: Broker, tmp_path) -> None:
    bootstrap_servers, sasl_bootstrap_servers = secured.bootstrap_servers, secured.sasl_bootstrap_servers
    src, sink = _topic(secured, 2), unique_topic_name("sink")
    past = int(time.time() * 1000) - 7_200_000
    sent = produce(bootstrap_servers, src, [Sent(i % 2, b"k%d" % (i % 5), b"v%d" % i, past + i) for i in range(30)])
    state = str(tmp_path / "state")
    # debug=security makes every librdkafka client log its SASL handshake: proof of which clients got it
    security = (_flags("--kafka", PLAIN + ["debug=security", "client.id=kc-source"])
                + _flags("--sink-kafka", PLAIN + ["debug=security", "client.id=kc-sink"]))
    # an uncompacted sink (NO_SINK_COMPACTION): the sink's every record against the winners, in order
    job = [sys.executable, "-m", "streaming", "--log-level", "DEBUG", "run", "--bootstrap-servers",
           sasl_bootstrap_servers, "--source-topic", src, "--sink-topic", sink, "--state-dir", state,
           "--once", "--config", "max.compaction.lag.ms=60000", *NO_SINK_COMPACTION, *security]
    run = subprocess.run(job, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    got = read_topic(bootstrap_servers, sink, 2)
    for p in range(2):
        assert sink_view(got[p]) == sent_view(winners([s for s in sent if s.partition == p]))

    sasl_lines = [line for line in run.stderr.splitlines() if "sasl_plaintext://" in line]
    assert any("kc-source#consumer" in line for line in sasl_lines), "the Spark source's consumers use SASL"
    assert any("kc-sink#producer" in line for line in sasl_lines), "the sink's transactional producers use SASL"

    # an empty sink is read by nobody: the progress reader runs where the job's note of its sinks is gone
    os.remove(sink_ends_file(open_state_dir(state)))
    sent += produce(bootstrap_servers, src, [Sent(i % 2, b"k%d" % (i % 5), b"v%d" % i, past + i) for i in range(30, 40)])
    again = subprocess.run(job, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr[-3000:]
    assert_sink_contract(bootstrap_servers, sink, sent, 2)
    assert any("kc-sink#consumer" in line and "sasl_plaintext://" in line for line in again.stderr.splitlines()), \
        "the sink progress reader uses SASL"
    status = subprocess.run([sys.executable, "-m", "streaming", "status", "--state-dir", state, "--json"],
                            capture_output=True, text=True, timeout=120)
    assert status.returncode == 0
    assert SECRET not in run.stdout + run.stderr + again.stdout + again.stderr + status.stdout + status.stderr
    for root, _, files in os.walk(state):
        for name in files:
            with open(os.path.join(root, name), "rb") as f:
                assert SECRET.encode() not in f.read(), f"{name} holds the password"
