"""SIGKILL the running compactor at random moments, restart it each time: no loss, no duplicate.

A producer keeps writing while the job is killed at least ten times (during ingest, cleaning and emission,
whichever is running), so every phase gets interrupted somewhere. The sink must then satisfy the contract
whatever the timing: per partition strictly increasing source offsets (nothing twice, order kept), every
sink record identical to its source record, and for every key the last sink record is the key's final
winner (nothing lost).
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time

import pytest

from streaming.kafka.admin import unique_topic_name
from tests.e2e.helpers import NO_SINK_COMPACTION, assert_sink_contract
from tests.kafka_helpers import Sent, produce

pytestmark = pytest.mark.integration

KILLS = 10
PARTITIONS = 2


def _children(pid: int) -> list[int]:
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                        out.append(int(entry))
            except (OSError, IndexError, ValueError):
                continue
    return out


def _wait_gone(pids: list[int], timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        alive = [p for p in pids if os.path.exists(f"/proc/{p}") and "Z" not in open(f"/proc/{p}/stat").read().rsplit(")", 1)[1].split()[0]]
        if not alive:
            return
        time.sleep(0.2)
    raise AssertionError(f"processes {pids} outlived the killed compactor (the JVM should exit with its driver)")


def test_sigkill_at_random_moments_loses_and_duplicates_nothing(bootstrap_servers, new_topic, tmp_path) -> None:
    rng = random.Random(20261121)
    src, sink = new_topic(partitions=PARTITIONS), unique_topic_name("sink")
    sent: list[Sent] = []
    stop = threading.Event()

    def keep_producing() -> None:
        i = 0
        while not stop.is_set():
            batch = [Sent((i + j) % PARTITIONS, b"key-%d" % ((i + j) % 40), b"value-%d" % (i + j),
                          int(time.time() * 1000), [("seq", b"%d" % (i + j))]) for j in range(25)]
            sent.extend(produce(bootstrap_servers, src, batch))
            i += 25
            stop.wait(0.3)

    command = [sys.executable, "-m", "streaming", "--log-level", "WARNING", "run", "--bootstrap-servers",
               bootstrap_servers, "--source-topic", src, "--sink-topic", sink, "--state-dir", str(tmp_path),
               "--config", "max.compaction.lag.ms=1000", "--config", "min.cleanable.dirty.ratio=0.1",
               "--config", "segment.bytes=4096", *NO_SINK_COMPACTION]
    producer = threading.Thread(target=keep_producing, daemon=True)
    producer.start()
    try:
        for _ in range(KILLS):
            proc = subprocess.Popen(command + ["--trigger-interval", "0.5"], stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL)
            time.sleep(rng.uniform(7.0, 16.0))  # JVM start is ~5 s: kills land in ingest, clean and emit
            assert proc.poll() is None, "the compactor died by itself"
            family = _children(proc.pid)
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            _wait_gone(family)
    finally:
        stop.set()
        producer.join()
    time.sleep(1.2)  # every record older than max.compaction.lag.ms: the final run cleans them all
    final = subprocess.run(command + ["--once"], capture_output=True, text=True, timeout=600)
    assert final.returncode == 0, final.stderr[-3000:]

    assert_sink_contract(bootstrap_servers, sink, sent, PARTITIONS)
    assert len(sent) > 500
