"""One segment: an Avro container file of records plus a JSON sidecar of what the cleaner needs.

The sidecar lets selection (dirty ratios, lags, horizons) run without reading records. It is trusted only
while the file has exactly the size it records; otherwise it is rebuilt from the file, after cutting any
torn tail (a partial block left by a crash) back to the last whole block.
"""

from __future__ import annotations

import io
import json
import logging
import os
from dataclasses import asdict, dataclass
from typing import BinaryIO, Iterator

import fastavro
from fastavro.write import Writer

from streaming.log.record import LogRecord, parsed_schema, record_size
from streaming.log.storage import Storage

log = logging.getLogger(__name__)

SEGMENT_SUFFIX = ".avro"
META_SUFFIX = ".meta.json"
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
SYNC_SIZE = 16

# Avro header metadata: a cleaned segment carries its offset range so a crash mid-swap can be completed
# from the swap file alone.
HDR_BASE = "kcompact.base_offset"
HDR_NEXT = "kcompact.next_offset"
HDR_CLEAN = "kcompact.clean"


def segment_name(base_offset: int) -> str:
    return f"{base_offset:020d}{SEGMENT_SUFFIX}"


def meta_name(base_offset: int) -> str:
    return f"{base_offset:020d}{META_SUFFIX}"


class CorruptSegmentError(RuntimeError):
    """A segment cannot be read even after recovery; the message names the file and position."""


@dataclass
class SegmentMeta:
    base_offset: int
    next_offset: int
    last_offset: int | None = None
    record_count: int = 0
    size_bytes: int = 0
    first_timestamp: int | None = None
    largest_timestamp: int | None = None
    clean: bool = False
    tombstone_count: int = 0
    min_delete_horizon_ms: int | None = None
    file_bytes: int = 0

    @property
    def empty(self) -> bool:
        return self.record_count == 0

    def observe(self, r: LogRecord, size: int) -> None:
        """Account for one record written to this segment (kept in step with the file)."""
        ts = r["timestamp"]
        if self.first_timestamp is None:
            self.first_timestamp = ts
        if self.largest_timestamp is None or ts > self.largest_timestamp:
            self.largest_timestamp = ts
        self.last_offset = r["offset"]
        self.next_offset = max(self.next_offset, r["offset"] + 1)
        self.record_count += 1
        self.size_bytes += size
        if r["value"] is None:
            self.tombstone_count += 1
            horizon = r.get("delete_horizon_ms")
            if horizon is not None and (self.min_delete_horizon_ms is None or horizon < self.min_delete_horizon_ms):
                self.min_delete_horizon_ms = horizon

    def to_json(self) -> bytes:
        return json.dumps(asdict(self), sort_keys=True).encode()

    @classmethod
    def from_json(cls, data: bytes) -> "SegmentMeta":
        return cls(**json.loads(data))


class BlockEncoder:
    """Encodes records into whole Avro blocks in memory; the caller appends the bytes to the file.

    Encoding in memory keeps every append a single write of whole blocks (so a crash tears at most the
    last write) and works on filesystems that only offer append streams.
    """

    def __init__(self, sync_marker: bytes | None = None, metadata: dict[str, str] | None = None) -> None:
        self._buf = io.BytesIO()
        self._writer = Writer(self._buf, parsed_schema(), codec="null", sync_marker=sync_marker or b"",
                              metadata=metadata)
        self.header = self._take()

    @property
    def sync_marker(self) -> bytes:
        return self.header[-SYNC_SIZE:]

    def write(self, r: LogRecord) -> None:
        self._writer.write(r)

    def take(self) -> bytes:
        """The encoded blocks since the last take, as bytes ready to append."""
        self._writer.flush()
        return self._take()

    def _take(self) -> bytes:
        data = self._buf.getvalue()
        self._buf.seek(0)
        self._buf.truncate()
        return data


def _read_varint(f: BinaryIO) -> int | None:
    shift = result = 0
    while True:
        b = f.read(1)
        if not b:
            return None
        byte = b[0]
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return (result >> 1) ^ -(result & 1)
        shift += 7
        if shift > 63:
            raise ValueError("varint longer than 10 bytes")


def read_header(f: BinaryIO) -> tuple[dict[str, bytes], bytes, int]:
    """Avro header metadata, sync marker and the position where blocks start."""
    f.seek(0)
    reader = fastavro.reader(f)
    header = reader._header  # fastavro exposes no public accessor for the raw header
    return header["meta"], header["sync"], f.tell()


def whole_blocks_end(f: BinaryIO, file_size: int) -> int:
    """The file position after the last complete, correctly framed block (blocks are never split)."""
    _, sync, pos = read_header(f)
    good = pos
    f.seek(pos)
    while good < file_size:
        try:
            count = _read_varint(f)
            size = _read_varint(f)
        except ValueError:
            break
        if count is None or size is None or count < 0 or size < 0:
            break
        end = f.tell() + size + SYNC_SIZE
        if end > file_size:
            break
        f.seek(size, io.SEEK_CUR)
        if f.read(SYNC_SIZE) != sync:
            break
        good = end
    return good


def rebuild_meta(storage: Storage, path: str, base_offset: int) -> tuple[SegmentMeta, int]:
    """Recompute a segment's metadata from its records; cut a torn tail. Returns (meta, bytes cut)."""
    size = storage.size(path)
    try:
        with storage.open_read(path) as f:
            good = whole_blocks_end(f, size)
            meta_hdr, _, _ = read_header(f)
    except Exception as exc:  # unreadable header: nothing in the file can be trusted
        raise CorruptSegmentError(f"{path}: unreadable Avro header ({exc})") from exc
    cut = size - good
    if cut:
        storage.truncate(path, good)
    base = int(meta_hdr.get(HDR_BASE, str(base_offset).encode()))
    if base != base_offset:
        raise CorruptSegmentError(f"{path}: header says base offset {base}, file name says {base_offset}")
    meta = SegmentMeta(base_offset=base_offset, next_offset=int(meta_hdr.get(HDR_NEXT, str(base).encode())),
                       clean=meta_hdr.get(HDR_CLEAN) == b"1")
    try:
        for r in iter_file(storage, path):
            meta.observe(r, record_size(r))
    except Exception as exc:
        raise CorruptSegmentError(f"{path}: a whole block does not decode ({exc})") from exc
    meta.file_bytes = good
    return meta, cut


def iter_file(storage: Storage, path: str) -> Iterator[LogRecord]:
    with storage.open_read(path) as f:
        yield from fastavro.reader(f)


def read_segment_metas(storage: Storage, directory: str) -> list[SegmentMeta]:
    """The sidecars of a log directory, without opening (and so without recovering) the log.

    For readers beside a running job (status, dump): they must never write, and a sidecar is at worst
    one append behind its segment.
    """
    metas = [SegmentMeta.from_json(storage.read(os.path.join(directory, name)))
             for name in storage.listdir(directory) if name.endswith(META_SUFFIX)]
    return sorted(metas, key=lambda m: m.base_offset)
