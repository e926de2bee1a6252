"""Which logs a compaction task commits before their emission as well as after it: those whose passes a repeat after
a crash would not do alike (a superseded tombstone the erase audit reads back, dead letters sent, a failed pass)."""

from __future__ import annotations

import errno
from types import SimpleNamespace

import pytest

from streaming.job.compact import PartitionWork, StageReport
from streaming.log import PartitionLog
from streaming.state.layout import LogDir
from tests.cleaner.test_cleaner_scenarios import PID, cfg, new_log, rec

SPEC = SimpleNamespace(max_passes_per_trigger=4)


def _work(tmp_path, plog: PartitionLog, **config) -> PartitionWork:
    return PartitionWork(LogDir(PID, str(tmp_path)), plog, None, cfg(**config), StageReport(PID), None)


def _held(tmp_path, config) -> PartitionLog:
    plog = new_log(tmp_path, config)
    plog.hold_commits()
    return plog


@pytest.mark.parametrize("audit, expected", [("hash", True), ("off", False)])
def test_a_pass_dropping_a_superseded_tombstone_is_committed_first_while_the_audit_is_kept(tmp_path, audit,
                                                                                           expected) -> None:
    config = dict(min_cleanable_dirty_ratio=0, erase_audit_keys=audit)
    plog = new_log(tmp_path, cfg(**config))
    plog.append([rec(0, b"t", None), rec(1, b"t", b"back"), rec(2, b"u", b"1")])
    plog.roll()
    work = _work(tmp_path, _held(tmp_path, cfg(**config)), **config)
    work.clean(SPEC, 10, None, -1)
    assert work.report.error is None and work.tombstones_superseded == 1
    assert work.commits_before_emission is expected


def test_a_pass_of_new_records_only_is_committed_after_the_emission(tmp_path) -> None:
    config = dict(min_cleanable_dirty_ratio=0)
    plog = new_log(tmp_path, cfg(**config))
    plog.append([rec(0, b"t", None), rec(1, b"u", b"1")])  # a tombstone, kept: no later record of its key
    plog.roll()
    work = _work(tmp_path, _held(tmp_path, cfg(**config)), **config)
    work.clean(SPEC, 10, None, -1)
    assert work.report.error is None and not work.commits_before_emission


def test_a_pass_that_sent_dead_letters_is_committed_first(tmp_path) -> None:
    config = dict(min_cleanable_dirty_ratio=0, compaction_keyless_policy="dead-letter")
    plog = new_log(tmp_path, cfg(**config))
    plog.append([rec(0, None, b"no key"), rec(1, b"u", b"1")])
    plog.roll()
    work = _work(tmp_path, _held(tmp_path, cfg(**config)), **config)
    letters: list = []
    work.clean(SPEC, 10, lambda batch: (letters.extend(batch), len(batch))[1], -1)
    assert [r["offset"] for r in letters] == [0] and work.dead_letters == 1
    assert work.commits_before_emission


def test_a_pass_that_fails_after_rewriting_part_of_the_log_is_committed_first(tmp_path, monkeypatch) -> None:
    """The first group's rewrite drops a superseded tombstone, the second's fails: the partition still emits,
    from the view the failed pass left, so that view is committed before it (whatever the erase audit: a failed
    pass may have sent dead letters too)."""
    config = dict(min_cleanable_dirty_ratio=0, segment_bytes=40, erase_audit_keys="off")  # a group a segment
    plog = new_log(tmp_path, cfg(**config))
    plog.append([rec(0, b"t", None)])
    plog.roll()
    plog.append([rec(1, b"u", b"1")])
    plog.roll()
    plog.append([rec(2, b"t", b"back"), rec(3, b"u", b"2")])
    plog.roll()
    held = _held(tmp_path, cfg(**config))
    rewrites = []
    real = held.replace

    def failing_second(*args, **kwargs):
        rewrites.append(1)
        if len(rewrites) == 2:
            raise OSError(errno.EIO, "Input/output error")
        return real(*args, **kwargs)

    monkeypatch.setattr(held, "replace", failing_second)
    work = _work(tmp_path, held, **config)
    work.clean(SPEC, 10, None, -1)
    assert work.report.error is not None and "Input/output error" in work.report.error.message
    assert len(rewrites) == 2 and 0 not in [r["offset"] for r in held.read()], "the tombstone gone from the view"
    assert work.failed and work.commits_before_emission
