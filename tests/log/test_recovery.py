"""Opening a log after a crash: torn tails cut to whole blocks and reported, metadata rebuilt."""

from __future__ import annotations

import os

import pytest

from streaming.log import BadRecordError, LogConfig, PartitionLog, make_record
from streaming.log.segment import meta_name, segment_name


def _log(path) -> PartitionLog:
    return PartitionLog(str(path), LogConfig(fsync=False), jitter_seed="t-0")


def test_torn_tail_is_cut_to_last_whole_block_and_reported(tmp_path) -> None:
    log = _log(tmp_path)
    log.append([make_record(o, b"k", b"v" * 10, 0) for o in range(3)])
    seg_file = tmp_path / segment_name(0)
    whole = seg_file.stat().st_size
    log.append([make_record(o, b"k", b"v" * 10, 0) for o in range(3, 6)])
    torn = seg_file.stat().st_size - 5
    with open(seg_file, "r+b") as f:
        f.truncate(torn)
    reopened = _log(tmp_path)
    assert reopened.recovery.truncated == {segment_name(0): torn - whole}
    assert seg_file.stat().st_size == whole
    assert [r["offset"] for r in reopened.read()] == [0, 1, 2]
    assert reopened.log_end_offset == 3
    reopened.append([make_record(o, b"k", b"v", 0) for o in range(3, 5)])
    assert [r["offset"] for r in _log(tmp_path).read()] == [0, 1, 2, 3, 4]


def test_truncated_bytes_are_reported_exactly(tmp_path) -> None:
    log = _log(tmp_path)
    log.append([make_record(0, b"k", b"v", 0)])
    seg_file = tmp_path / segment_name(0)
    whole = seg_file.stat().st_size
    with open(seg_file, "ab") as f:
        f.write(b"\x02\x40half a block")
    reopened = _log(tmp_path)
    assert reopened.recovery.truncated == {segment_name(0): len(b"\x02\x40half a block")}
    assert seg_file.stat().st_size == whole


@pytest.mark.parametrize("damage", ["missing", "garbage", "stale"])
def test_metadata_is_rebuilt_from_the_segment(tmp_path, damage: str) -> None:
    log = _log(tmp_path)
    log.append([make_record(0, b"a", b"1", 100), make_record(4, b"b", None, 50)])
    log.roll()
    expected = log.segments
    meta_file = tmp_path / meta_name(0)
    if damage == "missing":
        os.remove(meta_file)
    elif damage == "garbage":
        meta_file.write_bytes(b"{not json")
    else:
        meta_file.write_bytes(meta_file.read_bytes().replace(b'"record_count": 2', b'"record_count": 9')
                              .replace(b'"file_bytes": ', b'"file_bytes": 1'))
    reopened = _log(tmp_path)
    assert segment_name(0) in reopened.recovery.rebuilt
    assert reopened.segments == expected


def test_bad_record_keeps_everything_before_it(tmp_path) -> None:
    log = _log(tmp_path)
    good = [make_record(o, b"k", b"v", 0) for o in range(3)]
    bad = {**make_record(3, b"k", b"v", 0), "key": "a str, not bytes"}
    with pytest.raises(BadRecordError) as err:
        log.append(good + [bad, make_record(4, b"k", b"v", 0)])
    assert err.value.offset == 3 and err.value.accepted == 3
    assert "offset 3" in str(err.value)
    assert [r["offset"] for r in _log(tmp_path).read()] == [0, 1, 2]


def test_replayed_batch_is_skipped(tmp_path) -> None:
    log = _log(tmp_path)
    batch = [make_record(o, b"k", b"v", 0) for o in (0, 2, 3)]
    assert log.append(batch).appended == 3
    again = log.append(batch + [make_record(7, b"k", b"v", 0)])
    assert (again.appended, again.skipped) == (1, 3)
    assert [r["offset"] for r in log.read()] == [0, 2, 3, 7]
