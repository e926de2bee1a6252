"""A compaction task's changes to a log (its roll, its passes' swaps and checkpoints, its notes of the emission)
held in the writer's view and committed as one manifest: until then the log on disk is the log as it
was opened, so a crash repeats the passes and loses nothing; a writer fenced meanwhile finds out at that commit."""

from __future__ import annotations

import os

import pytest

from streaming.erasure.events import Emitted, Removed
from streaming.log import LogConfig, LogFencedError, PartitionLog, batch_from_records, make_record, storage
from streaming.log.storage import Barrier


def _log(path) -> PartitionLog:
    return PartitionLog(str(path), LogConfig(fsync=False), jitter_seed="t-0")


def _filled(path) -> PartitionLog:
    log = _log(path)
    log.append([make_record(o, b"k%d" % (o % 2), b"v%d" % o, 0) for o in range(6)])
    return log


def test_a_roll_a_swap_a_checkpoint_and_a_note_held_become_one_manifest(tmp_path) -> None:
    log = _filled(tmp_path)
    opened_at = log.version
    log.hold_commits()
    assert log.roll()
    sealed = log.segments[0]
    log.replace([sealed], [batch_from_records([make_record(o, b"k%d" % (o % 2), b"v%d" % o, 0) for o in (4, 5)])],
                journal=lambda: [Removed(0, 1)], checkpoint=6)
    log.note([Emitted(4, 2, 0)], {"emitted_through": 5})
    assert _log(tmp_path).version == opened_at, "nothing is committed while the changes are held"
    assert [r["offset"] for r in log.read()] == [4, 5], "the writer reads its own held view"

    log.commit_held()

    again = _log(tmp_path)
    assert again.version == opened_at + 1
    assert [r["offset"] for r in again.read()] == [4, 5]
    assert again.cleaner_checkpoint == 6 and again.log_end_offset == 6 and again.active.record_count == 0
    assert again.journal_marks == {"emitted_through": 5}
    assert [(e["e"], e["offset"]) for e in again.journal()] == [("removed", 0), ("emitted", 4)]


def test_a_crash_before_the_held_commit_leaves_the_log_as_it_was_opened(tmp_path) -> None:
    log = _filled(tmp_path)
    log.hold_commits()
    log.roll()
    log.set_cleaner_checkpoint(6)
    del log  # the task died before its commit: its objects are garbage, its manifest never made

    again = _log(tmp_path)
    assert again.cleaner_checkpoint is None and again.active.record_count == 6
    assert [r["offset"] for r in again.read()] == list(range(6))


def test_nothing_held_commits_nothing(tmp_path) -> None:
    log = _filled(tmp_path)
    opened_at = log.version
    log.hold_commits()
    log.set_cleaner_checkpoint(log.cleaner_checkpoint)  # no change
    log.commit_held()
    assert _log(tmp_path).version == opened_at


def test_a_writer_fenced_while_it_held_its_changes_is_refused_at_its_commit(tmp_path) -> None:
    zombie = _filled(tmp_path)
    zombie.hold_commits()
    zombie.roll()
    successor = _log(tmp_path)
    successor.append([make_record(6, b"k0", b"new", 0)])
    with pytest.raises(LogFencedError):
        zombie.commit_held()
    assert [r["offset"] for r in _log(tmp_path).read()] == list(range(7)), "the successor's log stands"


def test_commits_after_the_held_one_are_made_one_by_one_again(tmp_path) -> None:
    log = _filled(tmp_path)
    log.hold_commits()
    log.roll()
    log.commit_held()
    held_at = log.version
    log.append([make_record(6, b"k0", b"x", 0)])
    assert _log(tmp_path).version == held_at + 1


def test_a_commit_that_holds_on_holds_the_next_changes_until_the_next_commit(tmp_path) -> None:
    log = _filled(tmp_path)
    log.hold_commits()
    log.roll()
    log.commit_held(hold_on=True)
    passes_at = log.version
    log.note([Emitted(4, 2, 0)], {"emitted_through": 5})
    assert _log(tmp_path).version == passes_at, "the notes are held"
    log.commit_held()
    again = _log(tmp_path)
    assert again.version == passes_at + 1 and again.journal_marks == {"emitted_through": 5}


def test_commits_cannot_be_held_twice(tmp_path) -> None:
    log = _filled(tmp_path)
    log.hold_commits()
    log.roll()
    with pytest.raises(RuntimeError, match="held already"):
        log.hold_commits()


def test_a_journal_entry_written_ahead_of_the_held_commit_is_the_one_its_manifest_names(tmp_path) -> None:
    log = _filled(tmp_path)
    log.hold_commits()
    log.note([Removed(0, 1)])
    log.write_held_journal()  # a task writes every log's entries, crosses one barrier, then commits each
    assert _log(tmp_path).journal() == [], "an entry written ahead is named by no manifest yet"
    log.note([Emitted(4, 2, 0)], {"emitted_through": 5})  # held after the entry: journaled after it
    log.commit_held()
    again = _log(tmp_path)
    assert [(e["e"], e["offset"]) for e in again.journal()] == [("removed", 0), ("emitted", 4)]
    assert again.journal_marks == {"emitted_through": 5}


def test_a_journal_entry_written_ahead_by_a_fenced_writer_is_named_by_no_manifest(tmp_path) -> None:
    zombie = _filled(tmp_path)
    zombie.hold_commits()
    zombie.note([Removed(0, 1)])
    zombie.write_held_journal()
    _log(tmp_path).append([make_record(6, b"k0", b"new", 0)])
    with pytest.raises(LogFencedError):
        zombie.commit_held()
    assert _log(tmp_path).journal() == []


def test_a_commit_made_at_once_by_a_log_with_a_barrier_crosses_it_before_and_after_its_manifest(
        tmp_path, monkeypatch) -> None:
    asked = []
    monkeypatch.setattr(storage, "syncfs", lambda fd: asked.append("syncfs"))
    monkeypatch.setattr(os, "fsync", lambda fd: asked.append("fsync"))
    with Barrier() as barrier:
        log = PartitionLog(str(tmp_path), LogConfig(), jitter_seed="t-0", barrier=barrier)
        asked.clear()
        log.append([make_record(0, b"k", b"v", 0)])
    assert asked == ["syncfs", "syncfs"], "its object and journal durable before its manifest, that after it"
    assert [r["offset"] for r in _log(tmp_path).read()] == [0]
