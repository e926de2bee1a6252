"""A compaction task commits each of its logs twice a stage, whatever its passes did: the roll, the passes' swaps
and checkpoints and the cleaner's state in one manifest before the emission, the emission note and the erase
audit's notes in one after it. Its logs' writes are made durable together, by three barriers of the task whatever
its partition count (one before the manifests made before emitting, one after them, before the sink has any of
it, and one before the manifests made after), not by an fsync of each object."""

from __future__ import annotations

import os
import time

import pytest

from streaming.job.stage_task import compact_partitions
from streaming.log import batch_from_records, make_record
from streaming.state.layout import open_partition_log
from streaming.state.stores import open_state_dir
from streaming.kafka.clients import read_committed
from streaming.kafka.headers.offset_header import source_offset
from tests.job.test_stale_tasks import CONFIG, _jobs, _task
from tests.log.objects import disk_syncs

pytestmark = pytest.mark.integration

PARTITIONS = 3


def test_a_task_commits_each_log_before_and_after_emitting_it_behind_three_barriers(bootstrap_servers, tmp_path, monkeypatch) -> None:
    spec, dirs, sink = _jobs(bootstrap_servers, tmp_path, 10, PARTITIONS)
    state = open_state_dir(spec.state_dir)
    past = int(time.time() * 1000) - 3_600_000
    for d in dirs:  # keys k0..k4 again: the pass removes their first records
        open_partition_log(state, d, CONFIG.log_config).append(
            batch_from_records([make_record(o, b"k%d" % (o - 10), b"again", past) for o in range(10, 15)]))
    before = [open_partition_log(state, d, CONFIG.log_config).version for d in dirs]
    syncs = disk_syncs(monkeypatch)

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
    # the objects (and what the logs held as they were opened), then the manifests before the sink has any of it;
    # the notes after the emission journal nothing here, so the barrier before their manifests has nothing to sync
    assert syncs == ["syncfs", "syncfs"], "the disk asked for the task, not for each write"
    committed = read_committed(bootstrap_servers, sink, PARTITIONS)
    assert sorted(source_offset(list(r.headers)) for r in committed) == sorted(list(range(5, 15)) * PARTITIONS)
