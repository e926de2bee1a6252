"""SIGKILL the running compactor in each of its phases, restart it each time: no loss, no duplicate.

A producer keeps writing (updates of a few keys, and in every batch one record of a key written only once)
while the job is killed eight times, twice at each aim. A kill aimed at an append or an emission waits until the
run has made progress (records appended, a pass or an emission) and then for that phase to begin, read from the
job's own phase lines; one aimed at a log whose passes are made and not yet committed, or at the logs' notes
of an emission not yet committed, is held there (runtime.moments: those moments are too short to catch from the
log) and killed while it holds. Where each kill landed is recorded, and every aim must have been hit. The sink must then satisfy the contract whatever the timing: per partition strictly increasing
source offsets, every sink record identical to its source record, every record of a key written once in
the sink, and every key's last sink record its final winner. The erase audit must have come through the
kills whole: every tombstone sent is in it once, each step of it journaled once, and every tombstone in the
sink has its sink offset there.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from collections import Counter

import pytest

from streaming.kafka.admin import unique_topic_name
from streaming.log.journal import committed_journal
from streaming.runtime.moments import HOLD_ENV, HOLDER, REACHED, Moment
from streaming.state.layout import list_log_dirs
from streaming.state.stores import open_state_dir
from tests.e2e.helpers import COMPACTED_SINK, assert_sink_contract, children, read_topic
from tests.kafka_helpers import ChangeProducer

pytestmark = pytest.mark.integration

PARTITIONS = 2
PHASES = ("append", "clean", "emit", "log-commit")  # what the kills aim at, in turn
KILLS = 2 * len(PHASES)
HELD = {"clean": Moment.CLEANED, "log-commit": Moment.LOG_COMMIT}  # aims a hold lands on
PHASE_LINE = re.compile(r"phase: (append|compaction stage|clean|emit|idle)")
PROGRESS_LINE = re.compile(r"batch \d+: \d+ partitions, [1-9]\d* records appended|cleaned .*\[\d+, \d+\)|"
                           r"emitted [1-9]\d* records")
RUN_TIMEOUT_S = 120


def _wait_gone(pids: list[int], timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        alive = [p for p in pids if os.path.exists(f"/proc/{p}") and
                 "Z" not in Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()[0]]
        if not alive:
            return
        time.sleep(0.2)
    raise AssertionError(f"processes {pids} outlived the killed compactor (the JVM should exit with its driver)")


def _phases(text: str) -> list[str]:
    return [m[1].split()[0] for m in PHASE_LINE.finditer(text)]


def _kill_in(command: list[str], phase: str, log_path: Path, producer: ChangeProducer, hold: Path) -> str:
    """Start the job, wait for progress and then for ``phase`` to begin (or for it to hold at the phase's moment),
    SIGKILL it; the phase it died in."""
    env = None
    if phase in HELD:
        hold.mkdir()
        env = {**os.environ, HOLD_ENV: f"{HELD[phase].value}:{hold}"}
    with open(log_path, "w") as log_file:
        proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=log_file, env=env)
    deadline = time.monotonic() + RUN_TIMEOUT_S
    seen = 0
    progressed = False
    while True:
        producer.check()
        assert proc.poll() is None, f"the compactor died by itself: {log_path.read_text()[-3000:]}"
        assert time.monotonic() < deadline, f"no {phase} after progress within {RUN_TIMEOUT_S}s: " \
                                            f"{log_path.read_text()[-3000:]}"
        if phase in HELD and (hold / REACHED).exists():
            break
        text = log_path.read_text()
        progressed = progressed or PROGRESS_LINE.search(text) is not None
        phases = _phases(text)
        if progressed and phase in phases[seen:] and phase not in HELD:
            break
        seen = len(phases) if not progressed else seen
        time.sleep(0.02)
    family = children(proc.pid)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    if phase in HELD:  # the task holding (a Spark worker) dies with the job, as a machine's crash takes both
        family.append(int((hold / HOLDER).read_text()))
        with contextlib.suppress(ProcessLookupError):
            os.kill(family[-1], signal.SIGKILL)
    _wait_gone(family)
    return phase if phase in HELD else _phases(log_path.read_text())[-1]


def test_sigkill_in_every_phase_loses_and_duplicates_nothing(bootstrap_servers, new_topic, tmp_path) -> None:
    src, sink = new_topic(partitions=PARTITIONS), unique_topic_name("sink")
    command = [sys.executable, "-m", "streaming", "--log-level", "DEBUG", "run", "--bootstrap-servers",
               bootstrap_servers, "--source-topic", src, "--sink-topic", sink, "--state-dir", str(tmp_path / "state"),
               "--config", "max.compaction.lag.ms=1000", "--config", "min.cleanable.dirty.ratio=0.1",
               "--config", "segment.bytes=4096", *COMPACTED_SINK]
    producer = ChangeProducer(bootstrap_servers, src, PARTITIONS, keys=40, tombstone_every=7)
    producer.start()
    landed = []
    try:
        for i in range(KILLS):
            landed.append(_kill_in(command + ["--trigger-interval", "0.5"], PHASES[i % len(PHASES)],
                                   tmp_path / f"run-{i}.log", producer, tmp_path / f"hold-{i}"))
    finally:
        sent = producer.stop()
    print(f"kills landed in: {landed}")
    assert set(PHASES) <= set(landed), f"every phase was interrupted at least once: {landed}"
    time.sleep(1.2)  # every record older than max.compaction.lag.ms: the final run cleans them all
    final = subprocess.run(command + ["--once"], capture_output=True, text=True, timeout=600)
    assert final.returncode == 0, final.stderr[-3000:]

    assert_sink_contract(bootstrap_servers, sink, sent, PARTITIONS)
    assert len(sent) > 500
    _assert_audit_whole(str(tmp_path / "state"), bootstrap_servers, sink, sent)


def _assert_audit_whole(state_dir: str, bootstrap: str, sink: str, sent) -> None:
    state = open_state_dir(state_dir)
    in_sink = read_topic(bootstrap, sink, PARTITIONS)
    for log_dir in list_log_dirs(state):
        p = log_dir.pid.partition
        events = committed_journal(state.storage, log_dir.directory)
        twice = [k for k, n in Counter((e["e"], e["offset"]) for e in events).items() if n > 1]
        assert not twice, f"partition {p}: steps journaled twice: {twice[:10]}"
        ingested = {e["offset"] for e in events if e["e"] == "ingested"}
        assert ingested == {s.offset for s in sent if s.partition == p and s.value is None}, f"partition {p}"
        emitted = {e["offset"]: e["sink_offset"] for e in events if e["e"] == "emitted"}
        tombstones = {r["source_offset"]: r["offset"] for r in in_sink[p] if r["value"] is None}
        assert {o: emitted.get(o) for o in tombstones} == tombstones, \
            f"partition {p}: the audit's sink offsets are not the sink's"
        # the broker compacts the sink: a tombstone the sink no longer holds was superseded there by a later record
        # of its key, at a higher sink offset; never one the audit lacks
        last_of_key = {r["key"]: r["offset"] for r in in_sink[p]}
        key_of = {s.offset: s.key for s in sent if s.partition == p}
        gone = {o: at for o, at in emitted.items() if o not in tombstones}
        assert all(last_of_key.get(key_of[o], -1) > at for o, at in gone.items()), \
            f"partition {p}: tombstones neither in the sink nor superseded there: {sorted(gone)[:10]}"
