"""The cleaner's state of a partition is a mark of its log's manifest, committed with the pass; a log an older
kcompact last committed keeps it in cleaner-state.json, which is read until the first commit with the mark."""

from __future__ import annotations

from streaming.cleaner import PartitionCleanerState
from streaming.cleaner.partition_state import STATE_FILE
from streaming.log import LogConfig, PartitionLog, make_record
from streaming.log.storage import write_json


def _log(path) -> PartitionLog:
    return PartitionLog(str(path), LogConfig(fsync=False), jitter_seed="t-0")


def test_the_state_is_committed_with_the_log_and_read_back_from_its_manifest(tmp_path) -> None:
    log = _log(tmp_path)
    log.append([make_record(0, b"k", b"v", 0)])
    version = log.version
    PartitionCleanerState(passes=3, last_clean_ms=7).save(log)
    again = _log(tmp_path)
    assert again.version == version + 1
    assert PartitionCleanerState.load(again) == PartitionCleanerState(passes=3, last_clean_ms=7)
    assert not (tmp_path / STATE_FILE).exists()


def test_an_older_kcompacts_file_is_read_until_the_mark_is_committed(tmp_path) -> None:
    log = _log(tmp_path)
    log.append([make_record(0, b"k", b"v", 0)])
    write_json(log.storage, str(tmp_path / STATE_FILE), {"passes": 5, "retry_at_ms": 9, "gone_field": 1})
    assert PartitionCleanerState.load(_log(tmp_path)) == PartitionCleanerState(passes=5, retry_at_ms=9)
    PartitionCleanerState(passes=6).save(log)
    assert PartitionCleanerState.load(_log(tmp_path)) == PartitionCleanerState(passes=6)
