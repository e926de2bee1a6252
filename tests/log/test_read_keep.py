"""A compaction task reads a small object once: its map reads the object whole and checks it, and the task's
keep gives those bytes to the next read of its records (the emission's), once. What does not fit the read
buffer or the keep, and a damaged object, is read as without a keep."""

from __future__ import annotations

import pytest

from streaming.log import LogConfig, PartitionLog, batch_from_records, make_record
from streaming.log import segment
from streaming.log.read_keep import ReadKeep
from streaming.log.segment import CorruptSegmentError
from streaming.log.storage import LocalStorage
from tests.log.objects import PatchedStorage


def _log(tmp_path, keep: ReadKeep | None) -> tuple[PartitionLog, list[str]]:
    """A log of 40 records in one sealed segment (one object), and the reads of its objects from now on."""
    inner = LocalStorage(fsync=False)
    asked: list[str] = []

    def object_read(call):
        return lambda p: (asked.append(call) if "/segments/" in p else None, getattr(inner, call)(p))[1]

    storage = PatchedStorage(inner, get=object_read("get"), open_read=object_read("open_read"))
    plog = PartitionLog(str(tmp_path / "log"), LogConfig(fsync=False), storage, keep=keep)
    plog.append(batch_from_records([make_record(i, b"k%d" % i, b"v" * 300, 1000 + i) for i in range(40)]))
    plog.roll()
    asked.clear()
    return plog, asked


def _object_bytes(tmp_path) -> int:
    plog, _ = _log(tmp_path / "sizing", None)
    return sum(c.bytes for c in plog.segments[0].chunks)


def _keys(plog: PartitionLog) -> list[bytes]:
    return [k for b in plog.segment_keys(plog.segments[0]) for k in b.column("key").to_pylist()]


def _offsets(plog: PartitionLog) -> list[int]:
    return [r["offset"] for r in plog.read()]


def test_the_records_of_an_object_whose_keys_were_read_come_from_the_kept_bytes_once(tmp_path) -> None:
    plog, asked = _log(tmp_path, ReadKeep())
    assert _keys(plog) == [b"k%d" % i for i in range(40)]
    assert asked == ["get"], "read whole and checked"
    assert _offsets(plog) == list(range(40))
    assert asked == ["get"], "the records from the kept bytes"
    assert _offsets(plog) == list(range(40))
    assert asked == ["get", "get"], "given back once"


def test_without_a_keep_the_records_are_read_again(tmp_path) -> None:
    plog, asked = _log(tmp_path, None)
    _keys(plog)
    _offsets(plog)
    assert asked == ["open_read", "get"]


def test_an_object_larger_than_the_read_buffer_is_not_kept(tmp_path, monkeypatch) -> None:
    plog, asked = _log(tmp_path, ReadKeep())
    monkeypatch.setattr(segment, "READ_CHUNK", 4096)
    _keys(plog)
    assert _offsets(plog) == list(range(40))
    assert asked == ["open_read", "open_read", "open_read"], "the keys streamed; the records checked, then read"


def test_an_object_past_the_keeps_limit_is_read_again(tmp_path) -> None:
    plog, asked = _log(tmp_path, ReadKeep(limit=_object_bytes(tmp_path) - 1))
    _keys(plog)
    assert _offsets(plog) == list(range(40))
    assert asked == ["get", "get"]


def test_a_damaged_object_is_not_kept(tmp_path) -> None:
    plog, asked = _log(tmp_path, ReadKeep())
    [chunk] = plog.segments[0].chunks
    with open(plog.object_path(chunk.name), "r+b") as f:  # a value's byte flipped: framing intact, checksum not
        f.seek(chunk.bytes - 30)
        byte = f.read(1)
        f.seek(chunk.bytes - 30)
        f.write(bytes([byte[0] ^ 0xFF]))
    with pytest.raises(CorruptSegmentError, match="checksum mismatch"):
        _keys(plog)
    with pytest.raises(CorruptSegmentError, match="checksum mismatch"):
        _offsets(plog)
    assert asked == ["get", "get"]


def test_a_keep_gives_each_object_back_once_and_holds_at_most_its_limit() -> None:
    keep = ReadKeep(limit=10)
    keep.keep("a", b"12345")
    keep.keep("b", b"123456")  # over the limit: not kept
    keep.keep("c", b"12345")
    assert keep.take("b") is None
    assert keep.take("a") == b"12345" and keep.take("a") is None
    keep.keep("d", b"12345")  # room again once taken
    assert keep.take("c") == b"12345" and keep.take("d") == b"12345"
