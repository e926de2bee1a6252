"""Reading an object in pieces: one reused buffer, blocks cut at its end, blocks larger than it."""

from __future__ import annotations

import os
import zlib

import pytest

from streaming.log import batch_from_records, records_from_batch
from streaming.log import segment
from streaming.log.segment import (Chunk, CorruptSegmentError, SegmentMeta, object_body, object_header,
                                   read_batches, read_keys_checked, read_verified)
from streaming.log.storage import LocalStorage
from tests.log.objects import PatchedStorage


def write_object(path: str, records: list[dict]) -> Chunk:
    seg = SegmentMeta.new(0)
    data = object_header(seg)
    for i in range(0, len(records), 7):  # several appends' worth of blocks
        data += bytes(object_body(batch_from_records(records[i:i + 7]), seg.sync_marker))
    with open(path, "wb") as f:
        f.write(data)
    return Chunk(os.path.basename(path), len(data), zlib.crc32(data))


def make(i: int, size: int) -> dict:
    return {"offset": i, "timestamp": 1000 + i, "timestamp_type": 0, "key": b"k%d" % (i % 5),
            "value": None if i % 11 == 10 else os.urandom(size), "headers": [], "delete_horizon_ms": None}


@pytest.mark.parametrize("buffer", [2048, 5000, 1 << 20])  # the header (about 1 KiB) fits in the first
def test_an_object_read_in_pieces_gives_every_record_once_in_order(tmp_path, monkeypatch, buffer: int) -> None:
    monkeypatch.setattr(segment, "READ_CHUNK", buffer)
    records = [make(i, 12_000 if i % 9 == 0 else 300) for i in range(60)]  # some blocks larger than the buffer
    chunk = write_object(str(tmp_path / "obj"), records)
    storage = LocalStorage(fsync=False)
    read = [r for b in read_batches(storage, str(tmp_path / "obj")) for r in records_from_batch(b)]
    assert read == records
    keys = [k for b in read_keys_checked(storage, str(tmp_path / "obj"), chunk) for k in b.column("key").to_pylist()]
    assert keys == [r["key"] for r in records]


def test_damage_found_while_reading_in_pieces_is_raised_after_the_last_batch(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(segment, "READ_CHUNK", 2048)
    records = [make(i, 300) for i in range(40)]
    chunk = write_object(str(tmp_path / "obj"), records)
    with open(tmp_path / "obj", "r+b") as f:  # a value's byte flipped: framing intact, checksum not
        f.seek(chunk.bytes - 30)
        byte = f.read(1)
        f.seek(chunk.bytes - 30)
        f.write(bytes([byte[0] ^ 0xFF]))
    batches = read_keys_checked(LocalStorage(fsync=False), str(tmp_path / "obj"), chunk)
    seen = 0
    with pytest.raises(CorruptSegmentError):
        for b in batches:
            seen += b.num_rows
    assert seen == len(records)


@pytest.mark.parametrize("buffer, reads", [(1 << 20, ["get"]), (2048, ["open_read", "open_read"])])
def test_a_checked_read_reads_an_object_that_fits_the_buffer_once(tmp_path, monkeypatch, buffer, reads) -> None:
    """Checked, then decoded from memory; a larger object is read twice: checked before any batch is given."""
    monkeypatch.setattr(segment, "READ_CHUNK", buffer)
    records = [make(i, 300) for i in range(40)]
    chunk = write_object(str(tmp_path / "obj"), records)
    inner = LocalStorage(fsync=False)
    asked: list[str] = []
    storage = PatchedStorage(inner, get=lambda p: (asked.append("get"), inner.get(p))[1],
                             open_read=lambda p: (asked.append("open_read"), inner.open_read(p))[1])
    assert [r for b in read_verified(storage, str(tmp_path / "obj"), chunk) for r in records_from_batch(b)] == records
    assert asked == reads


@pytest.mark.parametrize("buffer", [1 << 20, 2048])
@pytest.mark.parametrize("damage", ["flipped", "truncated"])
def test_a_checked_read_gives_no_batch_of_a_damaged_object(tmp_path, monkeypatch, buffer: int, damage: str) -> None:
    monkeypatch.setattr(segment, "READ_CHUNK", buffer)
    chunk = write_object(str(tmp_path / "obj"), [make(i, 300) for i in range(40)])
    with open(tmp_path / "obj", "r+b") as f:
        if damage == "truncated":
            f.truncate(chunk.bytes - 10)
        else:
            f.seek(chunk.bytes - 30)
            byte = f.read(1)
            f.seek(chunk.bytes - 30)
            f.write(bytes([byte[0] ^ 0xFF]))
    batches = read_verified(LocalStorage(fsync=False), str(tmp_path / "obj"), chunk)
    with pytest.raises(CorruptSegmentError, match="truncated" if damage == "truncated" else "checksum mismatch"):
        next(batches)
