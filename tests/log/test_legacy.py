"""A log written by kcompact 0.1 (segment files appended in place, sidecars, Kafka's checkpoint file) is
taken over on first open: every accepted record, the segment bounds and the cleaner's checkpoint stay."""

from __future__ import annotations

import json
import os
import zlib
from dataclasses import asdict

import numpy as np
import pytest

from streaming.log import LogConfig, PartitionLog, batch_from_records, make_record
from streaming.log.columns import lag_timestamps, record_sizes
from streaming.log.legacy import LegacyLogError
from streaming.log.manifest import MANIFESTS, OBJECTS
from streaming.log.segment import HDR_BASE, SegmentMeta, container_header, encode_blocks

NOW = 1_700_000_000_000


def _old_segment(directory, base: int, offsets: list[int], torn_tail: list[int] = ()) -> None:
    """Segment file and sidecar as 0.1 wrote them; ``torn_tail`` records were appended after the sidecar."""
    sync = os.urandom(16)
    batch = batch_from_records([make_record(o, b"k%d" % (o % 3), b"v%d" % o, NOW + o) for o in offsets])
    data = container_header(sync, {HDR_BASE: str(base)}) + (encode_blocks(batch, sync) if offsets else b"")
    meta = SegmentMeta(base, base)
    if offsets:
        meta.observe(batch, record_sizes(batch), lag_timestamps(batch, NOW, 3_600_000))
    doc = {k: v for k, v in asdict(meta).items() if k not in ("sync", "chunks")}
    doc.update(file_bytes=len(data), crc32=zlib.crc32(data), tombstone_count=0)
    if torn_tail:
        data += encode_blocks(batch_from_records([make_record(o, b"t", b"torn", NOW) for o in torn_tail]), sync)
    (directory / f"{base:020d}.avro").write_bytes(data)
    (directory / f"{base:020d}.meta.json").write_text(json.dumps(doc))


def _old_log(directory) -> None:
    _old_segment(directory, 0, [0, 1, 2, 3, 4])
    _old_segment(directory, 5, [5, 7], torn_tail=[8, 9])
    (directory / "cleaner-offset-checkpoint").write_text("0\n1\nt 0 5\n")
    (directory / "log.json").write_text('{"segment_jitter_ms": 0, "jitter_ms": 0}')
    (directory / "00000000000000000000.avro.cleaned").write_bytes(b"a pass that died")


def test_an_old_layout_log_is_taken_over_with_every_accepted_record_and_its_checkpoint(tmp_path) -> None:
    _old_log(tmp_path)
    plog = PartitionLog(str(tmp_path), LogConfig(fsync=False), jitter_seed="t-0")
    assert [r["offset"] for r in plog.read()] == [0, 1, 2, 3, 4, 5, 7], "the torn tail was never committed"
    assert [(s.base_offset, s.next_offset) for s in plog.segments] == [(0, 5), (5, 8)]
    assert plog.cleaner_checkpoint == 5 and plog.log_end_offset == 8 and not plog.recovery
    assert sorted(os.listdir(tmp_path)) == [MANIFESTS, OBJECTS], "the old files are gone once committed"
    assert plog.append([make_record(o, b"k", b"new", NOW) for o in (8, 9)]).appended == 2, "the replay"
    reopened = PartitionLog(str(tmp_path), LogConfig(fsync=False), jitter_seed="t-0")
    assert [r["offset"] for r in reopened.read()] == [0, 1, 2, 3, 4, 5, 7, 8, 9]
    assert np.array_equal([s.record_count for s in reopened.segments], [5, 4])


def test_an_old_layout_log_with_damage_is_refused_and_left_as_it_is(tmp_path) -> None:
    _old_log(tmp_path)
    seg = tmp_path / "00000000000000000000.avro"
    data = bytearray(seg.read_bytes())
    data[data.index(b"v3") + 1] ^= 0x01
    seg.write_bytes(bytes(data))
    with pytest.raises(LegacyLogError, match="damaged"):
        PartitionLog(str(tmp_path), LogConfig(fsync=False))
    assert seg.read_bytes() == bytes(data) and not (tmp_path / MANIFESTS).exists()
