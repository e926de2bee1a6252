"""A compaction task commits each of its logs twice a stage, whatever its passes did: the roll, the passes' swaps
and checkpoints and the cleaner's state in one manifest before the emission, the emission note and the erase
audit's notes in one after it; so the disk is asked for few fsyncs a partition."""

from __future__ import annotations

import os
import time

import pytest

from streaming.job.stage_task import compact_partitions
from streaming.log import batch_from_records, make_record
from streaming.state.layout import open_partition_log
from streaming.state.stores import open_state_dir
from streaming.kafka.clients import read_committed
from streaming.kafka.offset_header import source_offset
from tests.job.test_stale_tasks import CONFIG, _jobs, _task

pytestmark = pytest.mark.integration

PARTITIONS = 3
# A log's writes in a stage whose pass removed records: the cleaned object and two manifests (which carry the
# cleaner's state and the emission note), each fsynced before its rename and in its directory after it.
FSYNCS_A_PARTITION = 3 * 2


def test_a_task_commits_each_log_before_and_after_emitting_it(bootstrap_servers, tmp_path, monkeypatch) -> None:
    spec, dirs, sink = _jobs(bootstrap_servers, tmp_path, 10, PARTITIONS)
    state = open_state_dir(spec.state_dir)
    past = int(time.time() * 1000) - 3_600_000
    for d in dirs:  # keys k0..k4 again: the pass removes their first records
        open_partition_log(state, d, CONFIG.log_config).append(
            batch_from_records([make_record(o, b"k%d" % (o - 10), b"again", past) for o in range(10, 15)]))
    before = [open_partition_log(state, d, CONFIG.log_config).version for d in dirs]
    fsyncs = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (fsyncs.append(fd), real(fd))[1])

    reports = compact_partitions(_task(spec, tuple(dirs), sink, fences=0), 0, spec, int(time.time() * 1000),
                                 drain=True)
    monkeypatch.undo()

    assert all(r.error is None and r.rolled and r.emitted == 10 for r in reports), reports
    after = [open_partition_log(state, d, CONFIG.log_config) for d in dirs]
    assert [log.version for log in after] == [v + 2 for v in before], "two manifests a log for the whole task"
    assert all(log.cleaner_checkpoint == 15 and [r["offset"] for r in log.read()] == list(range(5, 15))
               for log in after)
    assert all(log.journal_marks.keys() >= {"cleaner", "emission"} for log in after), "both notes in the manifest"
    assert not [f for d in dirs for f in os.listdir(d.directory) if f.endswith(".json")], "no note of its own"
    assert len(fsyncs) <= FSYNCS_A_PARTITION * PARTITIONS
    committed = read_committed(bootstrap_servers, sink, PARTITIONS)
    assert sorted(source_offset(list(r.headers)) for r in committed) == sorted(list(range(5, 15)) * PARTITIONS)
