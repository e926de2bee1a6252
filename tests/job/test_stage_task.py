"""A compaction task commits each of its logs once a stage, after the emission: the roll, the passes' swaps and
checkpoints, the cleaner's state, the emission note and the erase audit's notes in one manifest (a second, before
the emission, only for passes a repeat would not do alike: tests/job/test_compact.py). Its logs' writes
are made durable together, by one barrier of the task whatever its partition count, not by an fsync of each
object. A crash between the emission and that commit repeats the passes, and sends nothing twice."""

from __future__ import annotations

import dataclasses
import os
import time

import pytest

from streaming.job.spec import JobSpec
from streaming.job.stage_task import compact_partitions
from streaming.log import PartitionLog, batch_from_records, make_record
from streaming.state.layout import LogDir, open_partition_log
from streaming.state.stores import open_state_dir
from streaming.kafka.clients import read_committed
from streaming.kafka.headers.offset_header import source_offset
from tests.job.test_stale_tasks import CONFIG, SOURCE, _jobs, _task
from tests.log.objects import disk_syncs

pytestmark = pytest.mark.integration

PARTITIONS = 3


def _append_again(spec: JobSpec, dirs: list[LogDir], records: list[tuple[int, bytes, bytes | None]]) -> None:
    """(offset, key, value) appended to each log, an hour old: cleanable at once."""
    state = open_state_dir(spec.state_dir)
    past = int(time.time() * 1000) - 3_600_000
    for d in dirs:
        open_partition_log(state, d, CONFIG.log_config).append(
            batch_from_records([make_record(o, k, v, past) for o, k, v in records]))


def _versions(spec: JobSpec, dirs: list[LogDir]) -> list[int]:
    state = open_state_dir(spec.state_dir)
    return [open_partition_log(state, d, CONFIG.log_config).version for d in dirs]


def _sink_offsets(bootstrap: str, sink: str) -> list[int]:
    return sorted(source_offset(list(r.headers)) for r in read_committed(bootstrap, sink, PARTITIONS))


def test_a_task_commits_each_log_once_after_emitting_it_behind_one_barrier(bootstrap_servers, tmp_path,
                                                                          monkeypatch) -> None:
    spec, dirs, sink = _jobs(bootstrap_servers, tmp_path, 10, PARTITIONS)
    _append_again(spec, dirs, [(o, b"k%d" % (o - 10), b"again") for o in range(10, 15)])  # the pass drops k0..k4
    before = _versions(spec, dirs)
    syncs = disk_syncs(monkeypatch)

    reports = compact_partitions(_task(spec, tuple(dirs), sink, fences=0), 0, spec, int(time.time() * 1000),
                                 drain=True)
    monkeypatch.undo()

    assert all(r.error is None and r.rolled and r.emitted == 10 for r in reports), reports
    state = open_state_dir(spec.state_dir)
    after = [open_partition_log(state, d, CONFIG.log_config) for d in dirs]
    assert [log.version for log in after] == [v + 1 for v in before], "one manifest a log for the whole stage"
    assert all(log.cleaner_checkpoint == 15 and [r["offset"] for r in log.read()] == list(range(5, 15))
               for log in after)
    assert all(log.journal_marks.keys() >= {"cleaner", "emission"} for log in after), "both notes in the manifest"
    assert not [f for d in dirs for f in os.listdir(d.directory) if f.endswith(".json")], "no note of its own"
    # the objects (and what the logs held as they were opened), before the manifests that name them
    assert syncs == ["syncfs"], "the disk asked once for the task, not for each write"
    assert _sink_offsets(bootstrap_servers, sink) == sorted(list(range(5, 15)) * PARTITIONS)


@pytest.mark.parametrize("audit", ["hash", "off"])
def test_a_pass_dropping_a_superseded_tombstone_is_committed_before_its_emission_while_the_audit_is_kept(
        bootstrap_servers, tmp_path, audit) -> None:
    """The erase audit makes a lost emission's notes from the log's tombstones: that log must be the one
    emitted, so the pass that dropped the tombstone is not left to be made again after a crash."""
    spec, dirs, sink = _jobs(bootstrap_servers, tmp_path, 10, PARTITIONS)
    config = dataclasses.replace(CONFIG, erase_audit_keys=audit)
    spec = dataclasses.replace(spec, topics={SOURCE: dataclasses.replace(spec.topics[SOURCE], compaction=config)})
    _append_again(spec, dirs, [(10, b"k0", None), (11, b"k0", b"back")])  # a tombstone, then its key again
    before = _versions(spec, dirs)

    reports = compact_partitions(_task(spec, tuple(dirs), sink, fences=0), 0, spec, int(time.time() * 1000),
                                 drain=True)

    assert all(r.error is None and r.emitted == 10 for r in reports), reports
    manifests = 2 if audit != "off" else 1
    assert _versions(spec, dirs) == [v + manifests for v in before]
    assert _sink_offsets(bootstrap_servers, sink) == sorted(list(range(1, 10)) * PARTITIONS + [11] * PARTITIONS)


def test_a_task_that_stops_between_its_emission_and_its_commit_repeats_its_passes_and_sends_nothing_twice(
        bootstrap_servers, tmp_path, monkeypatch) -> None:
    spec, dirs, sink = _jobs(bootstrap_servers, tmp_path, 10, PARTITIONS)
    _append_again(spec, dirs, [(o, b"k%d" % (o - 10), b"again") for o in range(10, 15)])
    before = _versions(spec, dirs)

    def full_disk(plog: PartitionLog, hold_on: bool = False) -> None:
        raise OSError(28, "No space left on device", plog.dir)

    monkeypatch.setattr(PartitionLog, "commit_held", full_disk)
    reports = compact_partitions(_task(spec, tuple(dirs), sink, fences=0), 0, spec, int(time.time() * 1000),
                                 drain=True)
    monkeypatch.undo()
    assert all(r.emitted == 10 and r.error is not None and "No space left" in r.error.message for r in reports)
    assert _versions(spec, dirs) == before, "the passes were not committed"
    assert _sink_offsets(bootstrap_servers, sink) == sorted(list(range(5, 15)) * PARTITIONS)

    _append_again(spec, dirs, [(15, b"k0", b"later")])
    reports = compact_partitions(_task(spec, tuple(dirs), sink, fences=0), 0, spec, int(time.time() * 1000),
                                 drain=True)

    assert all(r.error is None and r.emitted == 1 for r in reports), reports
    state = open_state_dir(spec.state_dir)
    assert all(open_partition_log(state, d, CONFIG.log_config).cleaner_checkpoint == 16 for d in dirs)
    assert _sink_offsets(bootstrap_servers, sink) == sorted(list(range(5, 16)) * PARTITIONS), "each record once"
