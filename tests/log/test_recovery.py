"""Opening a log after a crash: torn tails cut to whole blocks and reported, metadata rebuilt; and damage
that no crash can cause (bytes lost or changed after they were written) reported, never repaired."""

from __future__ import annotations

import json
import os

import pytest

from streaming.log import BadRecordError, LogConfig, PartitionLog, make_record, record_size, records_from_batch
from streaming.log.segment import CorruptSegmentError, meta_name, segment_name


def _log(path) -> PartitionLog:
    return PartitionLog(str(path), LogConfig(fsync=False), jitter_seed="t-0")


def test_torn_tail_is_cut_to_last_whole_block_and_reported(tmp_path) -> None:
    log = _log(tmp_path)
    log.append([make_record(o, b"k", b"v" * 10, 0) for o in range(3)])
    seg_file = tmp_path / segment_name(0)
    whole = seg_file.stat().st_size
    sidecar = (tmp_path / meta_name(0)).read_bytes()
    log.append([make_record(o, b"k", b"v" * 10, 0) for o in range(3, 6)])
    torn = seg_file.stat().st_size - 5
    with open(seg_file, "r+b") as f:
        f.truncate(torn)
    (tmp_path / meta_name(0)).write_bytes(sidecar)  # the crash came before the sidecar write
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


@pytest.mark.parametrize("damage", ["missing", "garbage"])
def test_metadata_is_rebuilt_from_the_segment(tmp_path, damage: str) -> None:
    log = _log(tmp_path)
    log.append([make_record(0, b"a", b"1", 100), make_record(4, b"b", None, 50)])
    log.roll()
    expected = log.segments
    meta_file = tmp_path / meta_name(0)
    if damage == "missing":
        os.remove(meta_file)
    else:
        meta_file.write_bytes(b"{not json")
    reopened = _log(tmp_path)
    assert segment_name(0) in reopened.recovery.rebuilt
    assert reopened.segments == expected
    assert not reopened.damaged


def test_active_sidecar_one_append_behind_is_rebuilt(tmp_path) -> None:
    log = _log(tmp_path)
    log.append([make_record(0, b"a", b"1", 100)])
    sidecar = (tmp_path / meta_name(0)).read_bytes()
    log.append([make_record(4, b"b", None, 50)])
    expected = log.segments
    (tmp_path / meta_name(0)).write_bytes(sidecar)  # crash between the data write and the sidecar write
    reopened = _log(tmp_path)
    assert segment_name(0) in reopened.recovery.rebuilt
    assert reopened.segments == expected


def _sealed_then_active(tmp_path) -> PartitionLog:
    log = _log(tmp_path)
    log.append([make_record(o, b"k%d" % o, b"v" * 20, 0) for o in range(5)])
    log.roll()
    log.append([make_record(o, b"k%d" % o, b"w" * 20, 0) for o in range(5, 8)])
    return log


def test_truncated_sealed_segment_is_reported_not_cut_and_appends_go_on(tmp_path) -> None:
    _sealed_then_active(tmp_path)
    seg_file = tmp_path / segment_name(0)
    size = seg_file.stat().st_size
    with open(seg_file, "r+b") as f:
        f.truncate(size - 30)
    reopened = _log(tmp_path)
    assert reopened.damaged == {segment_name(0): f"file has {size - 30} bytes, its sidecar records {size}"}
    assert seg_file.stat().st_size == size - 30, "damage is left for the operator, not cut away"
    assert reopened.append([make_record(8, b"k", b"v", 0)]).appended == 1
    assert [r["offset"] for r in reopened.read(5)] == [5, 6, 7, 8]
    with pytest.raises(CorruptSegmentError, match="truncated"):
        list(reopened.read(0))


def test_truncated_active_segment_rolls_so_appends_go_on(tmp_path) -> None:
    _sealed_then_active(tmp_path)
    seg_file = tmp_path / segment_name(5)
    with open(seg_file, "r+b") as f:
        f.truncate(seg_file.stat().st_size - 10)
    reopened = _log(tmp_path)
    assert list(reopened.damaged) == [segment_name(5)]
    assert reopened.active.base_offset == 8 and reopened.log_end_offset == 8
    reopened.append([make_record(o, b"k", b"v", 0) for o in range(7, 10)])
    assert [r["offset"] for r in reopened.read(8)] == [8, 9], "offset 7 was stored before: a replay skips it"
    assert list(_log(tmp_path).damaged) == [segment_name(5)], "the damage is still reported on the next open"


def test_flipped_byte_is_found_by_checksum_before_anything_decodes(tmp_path) -> None:
    _sealed_then_active(tmp_path)
    seg_file = tmp_path / segment_name(0)
    data = bytearray(seg_file.read_bytes())
    at = data.index(b"v" * 20) + 3
    data[at] ^= 0x01  # inside a value: still valid Avro, only the checksum can tell
    seg_file.write_bytes(bytes(data))
    reopened = _log(tmp_path)
    assert not reopened.damaged, "same size: opening does not read the data"
    with pytest.raises(CorruptSegmentError, match="checksum mismatch"):
        next(reopened.read(0))
    assert [r["offset"] for r in reopened.read(5)] == [5, 6, 7], "other segments stay readable"


def test_key_columns_are_checked_as_read_and_damage_raises_after_the_last_batch(tmp_path) -> None:
    _sealed_then_active(tmp_path)
    seg_file = tmp_path / segment_name(0)
    intact = _log(tmp_path)
    keys = list(intact.segment_keys(intact.segments[0]))
    assert [k for b in keys for k in b.column("key").to_pylist()] == [b"k%d" % o for o in range(5)]
    full = [r for b in intact.segment_batches(intact.segments[0]) for r in records_from_batch(b)]
    assert [s for b in keys for s in b.column("size").to_pylist()] == [record_size(r) for r in full]
    data = bytearray(seg_file.read_bytes())
    data[data.index(b"v" * 20) + 3] ^= 0x01  # inside a value, which the key columns never even copy
    seg_file.write_bytes(bytes(data))
    damaged = _log(tmp_path)
    batches = damaged.segment_keys(damaged.segments[0])
    assert next(batches).num_rows == 5, "the batches come first"
    with pytest.raises(CorruptSegmentError, match="checksum mismatch"):
        next(batches)


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


def test_a_sidecar_written_by_an_older_version_still_opens(tmp_path) -> None:
    _sealed_then_active(tmp_path)
    sidecar = tmp_path / meta_name(0)
    doc = json.loads(sidecar.read_text())
    sidecar.write_text(json.dumps({**doc, "tombstone_count": 0}))  # a field this version no longer keeps
    reopened = _log(tmp_path)
    assert not reopened.damaged and [r["offset"] for r in reopened.read(0)][:5] == [0, 1, 2, 3, 4]
