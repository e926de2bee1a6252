"""A whole cluster in one job, small in data: 100 topics of 5 partitions, a few records each and a few hot
topics. The start-up output is a summary, a trigger with nothing new gives the idle partitions no task
(counted by the job's own metrics), a topic created while the job runs is picked up, and the sinks keep the
sink contract, which `kcompact verify` confirms."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from tests.cli.test_first_contact import KCOMPACT, kcompact, lines
from tests.e2e.helpers import COMPACTED_SINK, assert_sink_contract, wait_for
from tests.kafka_helpers import Sent, produce, produce_to_topics

pytestmark = pytest.mark.integration

TOPICS, PARTITIONS, HOT = 100, 5, 5


def _records(n: int) -> list[Sent]:
    now = int(time.time() * 1000)
    return [Sent(i % PARTITIONS, b"k%d" % (i % 7), b"v%d" % i, now + i) for i in range(n)]


def _metrics(state: Path) -> dict:
    path = state / "metrics.json"
    return json.loads(path.read_text())["job"] if path.exists() else {}


def test_a_hundred_topics_cost_what_their_work_costs(bootstrap_servers: str, tmp_path: Path) -> None:
    began = time.monotonic()
    prefix = f"cluster{time.time_ns()}"
    names = [f"{prefix}-{i:03d}" for i in range(TOPICS)]
    admin = AdminClient({"bootstrap.servers": bootstrap_servers})
    for future in admin.create_topics([NewTopic(n, PARTITIONS, 1, config={"cleanup.policy": "compact",
                                                                          "retention.ms": "-1"})
                                       for n in names]).values():
        future.result(60)
    sent = produce_to_topics(bootstrap_servers, {n: _records(60 if i < HOT else 3) for i, n in enumerate(names)})
    state = tmp_path / "state"
    argv = ["--bootstrap-servers", bootstrap_servers, "--source-topic-pattern", f"{prefix}-([0-9]+|new)",
            "--sink-topic-template", "{topic}.out", "--state-dir", str(state)]
    out_path = tmp_path / "out"
    with open(out_path, "w") as out:
        job = subprocess.Popen([*KCOMPACT, "run", *argv, "--trigger-interval", "1", "--config",
                                "max.compaction.lag.ms=1000", *COMPACTED_SINK],
                               stdout=out, stderr=subprocess.STDOUT, text=True)

    def emitted(n: int) -> bool:
        assert job.poll() is None, out_path.read_text()[-4000:]
        return _metrics(state).get("records-emitted", 0) >= n

    try:
        expected = sum(len({s.key for s in records if s.partition == p}) for records in sent.values()
                       for p in range(PARTITIONS))
        wait_for(lambda: emitted(expected), 180, "every topic's winners emitted")
        text = out_path.read_text()
        start_up = lines(text[:text.index("starting Spark")])
        assert len(start_up) <= 30, "\n".join(start_up)
        assert f"mirroring {TOPICS} topic(s) ({TOPICS * PARTITIONS:,} partitions)" in text, text[:3000]

        before = _metrics(state)
        wait_for(lambda: _metrics(state)["stages"] >= before["stages"] + 2, 60, "two more compaction stages")
        after = _metrics(state)
        stages = after["stages"] - before["stages"]
        assert after["stage-tasks"] == before["stage-tasks"], "idle partitions got tasks"
        logs = {(t, s.partition) for t, records in sent.items() for s in records}  # a partition never written has none
        assert after["logs-left-alone"] - before["logs-left-alone"] == stages * len(logs)

        late = f"{prefix}-new"
        admin.create_topics([NewTopic(late, PARTITIONS, 1, config={"retention.ms": "-1"})])[late].result(60)
        sent[late] = produce(bootstrap_servers, late, _records(10))
        expected += sum(len({s.key for s in sent[late] if s.partition == p}) for p in range(PARTITIONS))
        wait_for(lambda: emitted(expected), 120, "the topic created while the job runs is mirrored")
    finally:
        if job.poll() is None:
            job.send_signal(signal.SIGTERM)
        assert job.wait(120) == 0, out_path.read_text()[-4000:]
    print(f"job done {time.monotonic() - began:.1f}s")
    for topic in [*names[:HOT], names[-1], late]:
        assert_sink_contract(bootstrap_servers, f"{topic}.out", sent[topic], PARTITIONS)
    print(f"contract {time.monotonic() - began:.1f}s")
    verified = kcompact("verify", "--state-dir", str(state), "--topic", f"{prefix}-00[0-9]|{late}", "--json")
    assert verified.returncode == 0, verified.stdout[-3000:] + verified.stderr[-3000:]
    print(f"verified {time.monotonic() - began:.1f}s")
    topics = {p["source"] for p in json.loads(verified.stdout)["partitions"]}
    assert topics == {*names[:10], late}
