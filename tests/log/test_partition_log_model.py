"""Property test: any sequence of appends, replays, rolls, replaces and crashes reads back as a list model.

The model is a plain list of records. Crashes are simulated the way they happen: a torn last append
(its file cut at a random byte inside the bytes it wrote), a replace interrupted before or during the swap,
and leftover temporary files. After a torn append the log must hold the model plus a prefix of the torn
batch (whole blocks survive, a partial block never does).
"""

from __future__ import annotations

import os
import shutil
import tempfile

import hypothesis.strategies as st
import pytest
from hypothesis import HealthCheck, settings
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from streaming.log import ArrowStorage, LocalStorage, LogConfig, PartitionLog, batch_from_records, make_record
from streaming.log.segment import meta_name, segment_name


class SimulatedCrash(BaseException):
    """Stands for the process dying at this point; BaseException so no handler in the log swallows it."""


def _records(start: int, gaps: list[int], data) -> list[dict]:
    out, off = [], start
    for gap in gaps:
        off += gap
        key = data.draw(st.one_of(st.none(), st.binary(max_size=6)))
        value = data.draw(st.one_of(st.none(), st.binary(max_size=40)))
        headers = data.draw(st.lists(st.tuples(st.sampled_from(["a", "b", "ü"]), st.one_of(st.none(), st.binary(max_size=5))),
                                     max_size=3))
        ts = data.draw(st.integers(min_value=-10, max_value=10_000))
        out.append(make_record(off, key, value, ts, headers))
        off += 1
    return out


class LogMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = tempfile.mkdtemp(prefix="kcompact-log-")
        self.model: list[dict] = []
        self.end = 0  # the log end offset the model expects
        self.clock = 0  # the append time: a model clock, so a replayed example rolls exactly as the first run

    def teardown(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)

    @initialize(segment_bytes=st.integers(min_value=60, max_value=3000),
                segment_ms=st.integers(min_value=1, max_value=20_000),
                max_lag=st.integers(min_value=1, max_value=30_000),
                jitter=st.integers(min_value=0, max_value=500),
                arrow=st.booleans())
    def open_log(self, segment_bytes: int, segment_ms: int, max_lag: int, jitter: int, arrow: bool) -> None:
        from pyarrow.fs import LocalFileSystem

        self.config = LogConfig(segment_bytes=segment_bytes, segment_ms=segment_ms, segment_jitter_ms=jitter,
                                max_compaction_lag_ms=max_lag, fsync=False)
        self.storage = ArrowStorage(LocalFileSystem()) if arrow else LocalStorage(fsync=False)
        self.log = PartitionLog(self.dir, self.config, self.storage, jitter_seed="topic-0")

    def reopen(self) -> None:
        self.log = PartitionLog(self.dir, self.config, self.storage, jitter_seed="topic-0")

    def tick(self, data) -> int:
        self.clock += data.draw(st.integers(min_value=0, max_value=5_000))
        return self.clock

    @rule(data=st.data(), back=st.integers(min_value=0, max_value=5),
          gaps=st.lists(st.integers(min_value=0, max_value=3), max_size=12))
    def append(self, data, back: int, gaps: list[int]) -> None:
        batch = _records(max(0, self.end - back), gaps, data)
        self.log.append(batch, now_ms=self.tick(data))
        fresh = [r for r in batch if r["offset"] >= self.end]
        self.model.extend(fresh)
        if fresh:
            self.end = fresh[-1]["offset"] + 1

    @rule(now=st.integers(min_value=-10, max_value=60_000))
    def maybe_roll(self, now: int) -> None:
        before = len(self.log.segments)
        rolled = self.log.maybe_roll(now)
        assert rolled == (len(self.log.segments) == before + 1)

    @rule()
    def roll(self) -> None:
        self.log.roll()

    @precondition(lambda self: len(self.log.segments) > 1)
    @rule(data=st.data())
    def replace(self, data) -> None:
        sealed = self.log.segments[:-1]
        i = data.draw(st.integers(0, len(sealed) - 1))
        j = data.draw(st.integers(i, len(sealed) - 1))
        group = sealed[i: j + 1]
        lo, hi = group[0].base_offset, group[-1].next_offset
        inside = [r for r in self.model if lo <= r["offset"] < hi]
        keep = [r for r in inside if data.draw(st.booleans())]
        crash = data.draw(st.sampled_from(["none", "before-swap", "mid-swap"]))
        if crash == "none":
            self.log.replace(group, [batch_from_records(keep)])
        else:
            self._crash_during_replace(group, keep, crash)
            self.reopen()
        kept = {r["offset"] for r in keep}
        self.model = [r for r in self.model if not (lo <= r["offset"] < hi) or r["offset"] in kept]
        assert self.log.log_end_offset == self.end

    def _crash_during_replace(self, group, keep, where: str) -> None:
        log = self.log
        if where == "before-swap":
            def dies(*_a, **_k):
                raise SimulatedCrash

            log._complete_swap = dies
        else:
            real_delete = log.storage.delete
            calls = {"n": 0}

            def dies_after_one(path: str) -> None:
                calls["n"] += 1
                if calls["n"] > 1:
                    raise SimulatedCrash
                real_delete(path)

            log.storage.delete = dies_after_one
        with pytest.raises(SimulatedCrash):
            log.replace(group, [batch_from_records(keep)])
        if where != "before-swap":
            del log.storage.delete

    @rule(data=st.data())
    def crash_with_torn_append(self, data) -> None:
        gaps = data.draw(st.lists(st.integers(0, 2), min_size=1, max_size=30))
        batch = _records(self.end, gaps, data)
        active = self.log.active
        before_segments = len(self.log.segments)
        path = os.path.join(self.dir, segment_name(active.base_offset))
        meta_path = os.path.join(self.dir, meta_name(active.base_offset))
        before = self.storage.size(path)
        sidecar_before = self.storage.read(meta_path)
        self.log.append(batch, now_ms=self.tick(data))
        if len(self.log.segments) != before_segments:
            # the batch rolled: tearing is only realistic for the last write; model it as complete
            self.model.extend(batch)
            self.end = batch[-1]["offset"] + 1
            self.reopen()
            return
        after = self.storage.size(path)
        cut = data.draw(st.integers(before, after))
        # The data write is durable before the sidecar is rewritten, so a crash that tears the data
        # write leaves the sidecar of before the append.
        self.storage.truncate(path, cut)
        self.storage.write(meta_path, sidecar_before)
        self.reopen()
        got = [r["offset"] for r in self.log.read(batch[0]["offset"])]
        assert got == [r["offset"] for r in batch[: len(got)]], "a torn append keeps a prefix, in order"
        if cut == after:
            assert len(got) == len(batch)
        if cut == before:
            assert got == []
        self.model.extend(batch[: len(got)])
        if got:
            self.end = got[-1] + 1
        assert self.log.log_end_offset == self.end

    @rule(name=st.sampled_from(["00000000000000000000.avro.cleaned", "00000000000000000007.avro.tmp"]))
    def crash_leaves_temp_file(self, name: str) -> None:
        self.storage.write(os.path.join(self.dir, name), b"garbage from a dead process")
        self.reopen()
        assert name in self.log.recovery.discarded

    @rule()
    def clean_reopen(self) -> None:
        self.reopen()
        assert not self.log.recovery

    @invariant()
    def reads_back_the_model(self) -> None:
        if not hasattr(self, "log"):
            return
        got = list(self.log.read(0))
        assert [r["offset"] for r in got] == [r["offset"] for r in self.model]
        assert got == self.model
        assert self.log.log_end_offset == self.end
        segs = self.log.segments
        for a, b in zip(segs, segs[1:]):
            assert a.next_offset <= b.base_offset
        for s in segs:
            assert s.record_count == sum(1 for r in self.model if s.base_offset <= r["offset"] < s.next_offset)


LogMachine.TestCase.settings = settings(max_examples=150, stateful_step_count=30, deadline=None,
                                        suppress_health_check=[HealthCheck.too_slow])
TestPartitionLogAgainstModel = LogMachine.TestCase


@pytest.mark.parametrize("offset,expected_first", [(0, 0), (3, 5), (5, 5), (6, 6), (99, None)])
def test_read_at_removed_offset_starts_at_next_present(tmp_path, offset: int, expected_first) -> None:
    log = PartitionLog(str(tmp_path), LogConfig(segment_bytes=10_000, fsync=False))
    log.append([make_record(o, b"k", b"v", 1) for o in (0, 1, 2, 5, 6, 7)])
    log.roll()
    first = next(iter(log.read(offset)), None)
    assert (first["offset"] if first else None) == expected_first
