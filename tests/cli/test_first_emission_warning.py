"""A continuous run whose settings hold records back for more than an hour (Kafka's defaults: a week in the
active segment) says so at start, once per such topic, naming max.compaction.lag.ms; a topic that bounds it
and a --once run say nothing. Its progress says first that Spark starts and plans the first micro-batch, then,
on empty topics, that it waits for records."""

from __future__ import annotations

import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.cli.test_first_contact import KCOMPACT, kcompact, lines
from tests.kafka_helpers import wait_until_led

pytestmark = pytest.mark.integration

PROGRESS = re.compile(r" INFO streaming.job.progress: progress: .*s; (.*)$", re.M)
WARNING = re.compile(r" WARNING kcompact: (\S+): records reach (\S+) only once their segment is cleaned: up to (\S+) ")


def test_a_mirror_that_would_hold_records_for_a_week_warns_once_per_topic_and_a_bounded_one_does_not(
        bootstrap_servers: str, new_topic, tmp_path: Path) -> None:
    prefix = f"hold{time.time_ns()}"
    weekly = new_topic(prefix=prefix)
    bounded = new_topic(prefix=prefix, config={"max.compaction.lag.ms": "60000"})
    wait_until_led(bootstrap_servers, [weekly, bounded])  # else a topic found late gets a batch of its own
    argv = ["run", "--bootstrap-servers", bootstrap_servers, "--source-topic-pattern", f"{prefix}-[0-9a-f]+",
            "--sink-topic-template", "{topic}.c", "--state-dir", str(tmp_path / "state")]
    job_out = tmp_path / "out"
    with open(tmp_path / "err", "w+") as err, open(job_out, "w") as out:
        job = subprocess.Popen([*KCOMPACT, *argv], stdout=out, stderr=err, text=True)
        try:
            deadline = time.monotonic() + 120
            while "waiting for records" not in PROGRESS.findall((tmp_path / "err").read_text()) and job.poll() is None:
                assert time.monotonic() < deadline, (tmp_path / "err").read_text()
                time.sleep(0.2)
        finally:
            job.send_signal(signal.SIGTERM)
            code = job.wait(120)
        text = (tmp_path / "err").read_text()
    assert code == 0, text
    assert f"{bounded} (1 partitions) -> {bounded}.c" in job_out.read_text(), "the start-up summary names each group"
    phases = PROGRESS.findall(text)
    assert phases[0] == "starting the query: planning the first micro-batch", "the first line says what Spark is doing"
    assert text.index(" INFO streaming.job.runner: starting Spark") < text.index("progress: "), text
    assert phases[-1] == "waiting for records" and set(phases) == {phases[0], phases[-1]}, \
        "empty topics: the job waits, it does not ingest"
    warnings = WARNING.findall(text)
    assert warnings == [(weekly, f"{weekly}.c", "7d")], text
    assert len([line for line in lines(text) if " WARNING " in line]) == 1, text
    assert "segment.ms=7d, max.compaction.lag.ms=unbounded) unless 1 GiB of them fill segment.bytes first" in text
    once = kcompact(*argv, "--once", timeout=300)
    assert once.returncode == 0 and not WARNING.search(once.stderr), once.stderr
