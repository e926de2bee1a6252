"""Opening a log: the newest manifest describes it, whatever crashed before; damage that no crash can cause
(bytes lost or changed after they were written) is reported, never repaired; a zombie writer is refused."""

from __future__ import annotations

import json
import time

import pytest

from streaming.log import (BadRecordError, LogConfig, LogFencedError, PartitionLog, make_record, record_size,
                           records_from_batch)
from streaming.log.manifest import (DUE_AGE_GRACES, DUE_BYTES, DUE_ITEMS, KEEP_MANIFESTS, MANIFESTS, OBJECTS, Loaded,
                                    Manifest, garbage_due)
from streaming.log.segment import Chunk, CorruptSegmentError, SegmentMeta, segment_name
from streaming.log.storage import ObjectInfo
from tests.log.objects import segment_object


def _log(path) -> PartitionLog:
    return PartitionLog(str(path), LogConfig(fsync=False), jitter_seed="t-0")


def _sealed_then_active(tmp_path) -> PartitionLog:
    log = _log(tmp_path)
    log.append([make_record(o, b"k%d" % o, b"v" * 20, 0) for o in range(5)])
    log.roll()
    log.append([make_record(o, b"k%d" % o, b"w" * 20, 0) for o in range(5, 8)])
    return log


def test_truncated_sealed_segment_is_reported_not_cut_and_appends_go_on(tmp_path) -> None:
    _sealed_then_active(tmp_path)
    seg_file = segment_object(_log(tmp_path))
    size = seg_file.stat().st_size
    with open(seg_file, "r+b") as f:
        f.truncate(size - 30)
    reopened = _log(tmp_path)
    assert reopened.damaged == {segment_name(0): f"object {seg_file.name} has {size - 30} bytes, the manifest "
                                                 f"records {size}"}
    assert seg_file.stat().st_size == size - 30, "damage is left for the operator, not cut away"
    assert reopened.append([make_record(8, b"k", b"v", 0)]).appended == 1
    assert [r["offset"] for r in reopened.read(5)] == [5, 6, 7, 8]
    with pytest.raises(CorruptSegmentError, match="truncated"):
        list(reopened.read(0))


def test_truncated_active_segment_rolls_so_appends_go_on(tmp_path) -> None:
    _sealed_then_active(tmp_path)
    seg_file = segment_object(_log(tmp_path), 1)
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
    seg_file = segment_object(_log(tmp_path))
    data = bytearray(seg_file.read_bytes())
    at = data.index(b"v" * 20) + 3
    data[at] ^= 0x01  # inside a value: still valid Avro, only the checksum can tell
    seg_file.write_bytes(bytes(data))
    reopened = _log(tmp_path)
    assert not reopened.damaged, "same size: opening reads no data"
    with pytest.raises(CorruptSegmentError, match="checksum mismatch"):
        next(reopened.read(0))
    assert [r["offset"] for r in reopened.read(5)] == [5, 6, 7], "other segments stay readable"


def test_key_columns_are_checked_as_read_and_damage_raises_after_the_last_batch(tmp_path) -> None:
    _sealed_then_active(tmp_path)
    intact = _log(tmp_path)
    seg_file = segment_object(intact)
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


def test_a_manifest_written_by_an_older_version_still_opens(tmp_path) -> None:
    _sealed_then_active(tmp_path)
    newest = sorted((tmp_path / MANIFESTS).iterdir())[-1]
    doc = json.loads(newest.read_text())
    doc["segments"][0]["tombstone_count"] = 0  # a field this version no longer keeps
    newest.write_text(json.dumps(doc))
    reopened = _log(tmp_path)
    assert not reopened.recovery and [r["offset"] for r in reopened.read(0)][:5] == [0, 1, 2, 3, 4]


def test_a_crash_between_objects_and_manifest_leaves_the_log_as_it_was_and_the_objects_are_collected(tmp_path) -> None:
    log = _sealed_then_active(tmp_path)
    before = [r["offset"] for r in log.read()]

    def crash(*_a):
        raise KeyboardInterrupt  # the process dies here

    log.storage.put_if_absent = crash
    with pytest.raises(KeyboardInterrupt):
        log.append([make_record(o, b"k", b"v", 0) for o in range(8, 12)])
    del log.storage.put_if_absent
    orphans = {p.name for p in (tmp_path / OBJECTS).iterdir()} - _referenced(log)
    assert len(orphans) == 1
    reopened = _log(tmp_path)
    assert [r["offset"] for r in reopened.read()] == before and reopened.log_end_offset == 8
    assert reopened.collect_garbage() == 0, "young objects may still be a writer's, before its manifest"
    grace = LogConfig().file_delete_delay_ms
    assert reopened.collect_garbage(now_ms=int(time.time() * 1000) + grace + 1000) == 1
    assert not {p.name for p in (tmp_path / OBJECTS).iterdir()} & orphans
    assert reopened.append([make_record(o, b"k", b"v", 0) for o in range(8, 12)]).appended == 4, "the replay"
    assert [r["offset"] for r in _log(tmp_path).read()] == before + [8, 9, 10, 11]


def test_a_zombie_writer_is_refused_and_changes_nothing(tmp_path) -> None:
    live = _sealed_then_active(tmp_path)
    zombie = _log(tmp_path)
    live.append([make_record(8, b"k", b"live", 0)])
    with pytest.raises(LogFencedError, match="fenced"):
        zombie.append([make_record(8, b"k", b"zombie", 0), make_record(9, b"k", b"zombie", 0)])
    with pytest.raises(LogFencedError):
        zombie.replace(zombie.segments[:1], [])
    assert [(r["offset"], r["value"]) for r in _log(tmp_path).read(8)] == [(8, b"live")]


def test_a_zombie_whose_active_object_was_folded_and_collected_is_refused_as_fenced(tmp_path) -> None:
    """Found by the model test: the zombie's append would fold the active segment's last object, which the
    live writer has since folded into a new one and collected; the zombie is refused at its commit."""
    config = LogConfig(fsync=False, file_delete_delay_ms=0)
    live = PartitionLog(str(tmp_path), config, jitter_seed="t-0")
    live.append([make_record(0, b"k", b"v", 0)])
    zombie = PartitionLog(str(tmp_path), config, jitter_seed="t-0")
    live.append([make_record(1, b"k", b"live", 0)])  # folds offset 0's object into a new one
    for _ in range(KEEP_MANIFESTS):  # until no kept manifest names the folded object
        live.set_cleaner_checkpoint((live.cleaner_checkpoint or 0) + 1)
    live.collect_garbage(grace_ms=0)
    assert not (tmp_path / OBJECTS / zombie.active.chunks[-1].name).exists()
    with pytest.raises(LogFencedError, match="fenced"):
        zombie.append([make_record(1, b"k", b"zombie", 0)])
    assert [(r["offset"], r["value"]) for r in _log(tmp_path).read()] == [(0, b"v"), (1, b"live")]


def test_a_zombie_whose_next_version_was_collected_creates_it_and_is_still_fenced(tmp_path) -> None:
    """Its put-if-absent succeeds (the version it takes was collected); the newer versions beside it fence it."""
    config = LogConfig(fsync=False, file_delete_delay_ms=0)
    live = PartitionLog(str(tmp_path), config, jitter_seed="t-0")
    live.append([make_record(0, b"k", b"v", 0)])
    live.roll()
    zombie = PartitionLog(str(tmp_path), config, jitter_seed="t-0")
    for _ in range(KEEP_MANIFESTS + 2):
        live.set_cleaner_checkpoint((live.cleaner_checkpoint or 0) + 1)
    live.collect_garbage(grace_ms=0)
    assert not (tmp_path / MANIFESTS / f"{zombie.version + 1:020d}.json").exists()
    with pytest.raises(LogFencedError, match="fenced"):
        zombie.set_cleaner_checkpoint(0)
    assert (tmp_path / MANIFESTS / f"{zombie.version + 1:020d}.json").exists(), "it did create its version"
    assert _log(tmp_path).version == live.version


def test_many_small_appends_keep_few_objects(tmp_path) -> None:
    log = _log(tmp_path)
    for o in range(1000):
        log.append([make_record(o, b"k%d" % o, b"v" * 30, 0)])
    assert len(log.active.chunks) <= 11, "a binary counter: about log2(1000) objects"
    assert [r["offset"] for r in _log(tmp_path).read()] == list(range(1000))


def test_opening_a_log_leaves_less_than_a_collections_worth_of_garbage(tmp_path) -> None:
    """A running job opens each log twice a stage, and a collection reads every manifest it keeps: an open collects
    only once there is a collection's worth (KEEP_MANIFESTS old manifests, as many old objects, or their bytes)."""
    config = LogConfig(fsync=False, segment_bytes=1, file_delete_delay_ms=1000)  # a segment an append: no folds
    log = PartitionLog(str(tmp_path), config, jitter_seed="t-0")
    for o in range(1, KEEP_MANIFESTS + 4):
        log.append([make_record(o, b"k", b"v", 0)])
    manifests = sorted((tmp_path / MANIFESTS).iterdir())
    assert len(manifests) > KEEP_MANIFESTS
    time.sleep(1.1)  # past the grace period, not yet DUE_AGE_GRACES of it
    PartitionLog(str(tmp_path), config, jitter_seed="t-0")
    assert sorted((tmp_path / MANIFESTS).iterdir()) == manifests


def _referenced(log: PartitionLog) -> set[str]:
    return {c.name for s in log.segments for c in s.chunks}


def test_opening_a_log_collects_what_earlier_writers_left_past_file_delete_delay_ms(tmp_path) -> None:
    """A short run (a --once, say) never reaches the every-32-commits collection: the next one to open the log
    removes what the earlier runs replaced or folded, and old manifests, once past file.delete.delay.ms."""
    config = LogConfig(fsync=False, segment_bytes=1000, file_delete_delay_ms=1000)
    log = PartitionLog(str(tmp_path), config, jitter_seed="t-0")
    for o in range(60):  # one record an append: objects folded together, and rolls; garbage and manifests pile up
        log.append([make_record(o, b"k%d" % (o % 4), b"v" * 30, 0)])
    objects = {p.name for p in (tmp_path / OBJECTS).iterdir()}
    assert len(list((tmp_path / MANIFESTS).iterdir())) > KEEP_MANIFESTS
    PartitionLog(str(tmp_path), config, jitter_seed="t-0")
    assert {p.name for p in (tmp_path / OBJECTS).iterdir()} == objects, "nothing younger than the delay goes"
    time.sleep(1.1)
    reopened = PartitionLog(str(tmp_path), config, jitter_seed="t-0")
    kept = sorted((tmp_path / MANIFESTS).iterdir())
    needed = {c.name for m in kept for s in Manifest.from_json(m.read_bytes()).segments for c in s.chunks}
    assert len(kept) == KEEP_MANIFESTS and {p.name for p in (tmp_path / OBJECTS).iterdir()} == needed
    assert len(needed) < len(objects) and _referenced(reopened) <= needed
    assert [r["offset"] for r in reopened.read()] == list(range(60))


@pytest.mark.parametrize("objects, manifests, due", [
    ([(1, 5)] * (DUE_ITEMS - 1), 0, False),  # a few small objects, a little past the grace period
    ([(1, 5)] * DUE_ITEMS, 0, True),
    ([(1, 5)] * 3, DUE_ITEMS - 3, True),  # old manifests past the kept ones count as items too
    ([(DUE_BYTES, 5)], 0, True),
    ([(1, DUE_AGE_GRACES + 1)], 0, True),  # one item, long past the grace period: a quiet log's
    ([(DUE_BYTES, 0)] * DUE_ITEMS, 0, False),  # all within the grace period
], ids=["few", "items", "manifests-and-objects", "bytes", "old", "young"])
def test_an_open_collects_a_collections_worth(objects, manifests: int, due: bool) -> None:
    grace, now = 1000, 100_000
    segment = SegmentMeta(0, 1, chunks=(Chunk("named.avro", 1, 0),))
    versions = KEEP_MANIFESTS + manifests
    listed = [ObjectInfo(f"{v:020d}.json", 1, now - (5 if v < manifests else 0) * grace) for v in range(versions)]
    loaded = Loaded(Manifest(versions - 1, [segment]), versions - 1, listed=listed)
    infos = [ObjectInfo("named.avro", 1, 0)] + [ObjectInfo(f"{i}.avro", size, now - graces * grace)
                                                for i, (size, graces) in enumerate(objects)]
    assert garbage_due(loaded, infos, now, grace) == due
