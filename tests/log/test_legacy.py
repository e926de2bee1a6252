"""A log written by kcompact 0.1 (segment files appended in place, sidecars, Kafka's checkpoint file) is
taken over on first open: every accepted record, the segment bounds and the cleaner's checkpoint stay.

The log under data/kcompact-0.1-log was written by kcompact 0.1's own code (data/write_0.1_log.py, run from
a checkout of a0d9a66): five records and a tombstone, a cleaning pass (checkpoint 6, the tombstone's horizon
set), two more records in the active segment, then two crashes as 0.1 could die: a pass that wrote its
.cleaned file but never renamed it, and an append to the active segment whose sidecar was never updated
(offsets 9 and 10: no micro-batch commit covers them).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from streaming.log import LogConfig, PartitionLog, make_record
from streaming.log.legacy import LegacyLogError
from streaming.log.manifest import MANIFESTS, OBJECTS

OLD_LOG = Path(__file__).parent / "data" / "kcompact-0.1-log"
NOW = 1_700_000_000_000  # the time the 0.1 log was written at
HORIZON = NOW + 10 + 3_600_000  # its pass ran at NOW + 10 with delete.retention.ms=3600000


def _old_log(tmp_path) -> Path:
    directory = tmp_path / "orders-0"
    shutil.copytree(OLD_LOG, directory)
    return directory


def _open(directory: Path) -> PartitionLog:
    return PartitionLog(str(directory), LogConfig(fsync=False), jitter_seed="orders-0")


def test_a_log_of_kcompact_0_1_is_taken_over_with_every_accepted_record_and_its_checkpoint(tmp_path) -> None:
    directory = _old_log(tmp_path)
    plog = _open(directory)
    records = [(r["offset"], r["key"], r["value"], r["delete_horizon_ms"]) for r in plog.read()]
    assert records == [(2, b"k2", b"v2", None), (3, b"k0", b"v3", None), (5, b"k1", None, HORIZON),
                       (7, b"k1", b"v7", None), (8, b"k2", b"v8", None)], "the torn tail was never committed"
    assert [(s.base_offset, s.next_offset, s.clean) for s in plog.segments] == [(0, 6, True), (6, 9, False)]
    assert plog.cleaner_checkpoint == 6 and plog.log_end_offset == 9 and not plog.recovery
    assert sorted(os.listdir(directory)) == ["cleaner-state.json", MANIFESTS, OBJECTS], \
        "the old files and the dead pass's leftover are gone once committed; the cleaner's state stays"
    assert plog.append([make_record(o, b"k", b"new", NOW) for o in (9, 10)]).appended == 2, "the replay"
    reopened = _open(directory)
    assert [r["offset"] for r in reopened.read()] == [2, 3, 5, 7, 8, 9, 10]
    assert [s.record_count for s in reopened.segments] == [3, 4]


def test_a_log_of_kcompact_0_1_with_damage_is_refused_and_left_as_it_is(tmp_path) -> None:
    directory = _old_log(tmp_path)
    segment = directory / "00000000000000000000.avro"
    data = bytearray(segment.read_bytes())
    data[data.index(b"v3") + 1] ^= 0x01
    segment.write_bytes(bytes(data))
    before = sorted(os.listdir(directory))
    with pytest.raises(LegacyLogError, match="damaged"):
        _open(directory)
    assert segment.read_bytes() == bytes(data) and sorted(os.listdir(directory)) == before
