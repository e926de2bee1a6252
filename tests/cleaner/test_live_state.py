"""The live state of a log (streaming.cleaner.live_state) against the reference model: after any appends,
rolls and cleaning passes, each key's winner under each strategy, as of every offset the log still holds
exactly, and a refusal naming the earliest exact point for every offset before it."""

from __future__ import annotations

import dataclasses
import shutil
import tempfile

import hypothesis.strategies as st
import pytest
from hypothesis import given, settings

from streaming.cleaner import Cleaner, CompactionConfig, LogCleanerManager
from streaming.cleaner.live_state import AsOf, AsOfError, earliest_exact, live_records
from streaming.log import PartitionLog, make_record
from streaming.log.columns import iter_records
from streaming.log.manifest import load_newest
from streaming.partition_id import PartitionId
from tests.cleaner import reference_model as model
from tests.cleaner.test_cleaner_model import HEADER, KEYS, header_lists

PID = PartitionId("topic", 0)


@st.composite
def histories(draw):
    """Records in offset order (gaps, keyless ones, tombstones, versions) and where the job rolled and
    cleaned between its appends."""
    records, steps, offset, now = [], [], 0, 1_000
    for _ in range(draw(st.integers(1, 8))):
        batch = []
        for _ in range(draw(st.integers(1, 12))):
            offset += draw(st.integers(0, 2))
            key = draw(st.sampled_from([*KEYS, None])) if draw(st.integers(0, 9)) == 0 else draw(st.sampled_from(KEYS))
            value = draw(st.one_of(st.none(), st.binary(min_size=1, max_size=6)))
            batch.append(make_record(offset, key, value, now + draw(st.integers(-50, 50)), draw(header_lists())))
            offset += 1
            now += 10
        records.extend(batch)
        steps.append((batch, draw(st.sampled_from(["append", "roll", "clean"]))))
    return records, steps


def _state(directory: str, cfg: CompactionConfig, as_of: AsOf | None = None, tombstones: bool = False) -> list[dict]:
    manifest = load_newest(PartitionLog(directory).storage, directory).manifest
    got = iter_records(live_records(PartitionLog(directory).storage, directory, manifest, cfg, as_of, tombstones,
                                    "topic-0").batches)
    return [_row(r) for r in got]


def _row(r: dict) -> dict:
    """A record as the state holds it: a tombstone's delete horizon is the cleaner's, not the state's."""
    return {k: v for k, v in r.items() if k != "delete_horizon_ms"}


def _rows(records: list[dict]) -> list[dict]:
    return [_row(r) for r in records]


@settings(max_examples=100, deadline=None)
@given(strategy=st.sampled_from(["offset", "timestamp", "header"]), history=histories(), tombstones=st.booleans())
def test_the_live_state_is_the_models_winners_at_every_exact_offset_and_refused_before(strategy, history,
                                                                                       tombstones) -> None:
    records, steps = history
    cfg = CompactionConfig.from_mapping({
        "compaction.strategy": strategy, "segment.bytes": "200", "min.cleanable.dirty.ratio": "0.0",
        "delete.retention.ms": str(10**12), **({"compaction.strategy.header": HEADER} if strategy == "header" else {})})
    directory = tempfile.mkdtemp(prefix="kcompact-live-")
    try:
        log = PartitionLog(directory, dataclasses.replace(cfg.log_config, fsync=False), jitter_seed=str(PID))
        manager = LogCleanerManager(cfg, Cleaner(cfg))
        for batch, then in steps:
            log.append(batch, now_ms=2_000)
            if then != "append":
                log.roll()
            if then == "clean":
                assert manager.clean_partition(PID, log, 2_000).error is None
        header = HEADER if strategy == "header" else None
        manifest = load_newest(log.storage, directory).manifest
        exact, end = earliest_exact(manifest), log.log_end_offset
        assert _state(directory, cfg, None, tombstones) == _rows(model.live(records, end, strategy, header, tombstones))
        for at in range(0, end + 1):
            if at < exact:
                with pytest.raises(AsOfError, match=f"earliest exact point, offset {exact}"):
                    _state(directory, cfg, AsOf(offset=at), tombstones)
            else:
                assert _state(directory, cfg, AsOf(offset=at), tombstones) == \
                    _rows(model.live(records, at, strategy, header, tombstones))
        with pytest.raises(AsOfError, match="past the log's end"):
            _state(directory, cfg, AsOf(offset=end + 1))
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def test_an_as_of_time_reads_through_the_first_offset_stamped_at_or_after_it(tmp_path) -> None:
    cfg = CompactionConfig.from_mapping({"segment.bytes": "100000"})
    log = PartitionLog(str(tmp_path), dataclasses.replace(cfg.log_config, fsync=False))
    records = [make_record(i, b"k%d" % (i % 3), b"v%d" % i, 1_000 + 10 * i) for i in range(10)]
    log.append(records, now_ms=2_000)
    got = _state(str(tmp_path), cfg, AsOf(timestamp_ms=1_045))  # offset 5 is the first at or after it
    assert got == _rows(model.live(records, 5, "offset", None))
    assert _state(str(tmp_path), cfg, AsOf(timestamp_ms=5_000)) == _rows(model.live(records, 10, "offset", None))
