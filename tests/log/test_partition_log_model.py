"""Property test: any sequence of appends, replays, rolls, replaces, crashes, zombies and garbage
collection reads back as a list model.

The model is a plain list of records. Crashes are simulated the way they happen on any store: the process
dies after writing objects but before their manifest, or while writing an object. Either way the log must
read back exactly as before the interrupted change. A zombie (a writer that opened the log earlier) is
refused and changes nothing; garbage collection never removes what the log reads.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile

import hypothesis.strategies as st
import pytest
from hypothesis import HealthCheck, settings
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from streaming.log import (ArrowStorage, LocalStorage, LogConfig, LogFencedError, PartitionLog, batch_from_records,
                           make_record)
from streaming.log.manifest import KEEP_MANIFESTS, Manifest, manifest_dir, objects_dir
from tests.log.objects import PatchedStorage


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
        local = LocalStorage(fsync=False)
        self.storage = ArrowStorage(LocalFileSystem(), local.put_if_absent) if arrow else local
        self.log = self.opened()
        self.zombie: PartitionLog | None = None

    def opened(self) -> PartitionLog:
        return PartitionLog(self.dir, self.config, self.storage, jitter_seed="topic-0")

    def reopen(self) -> None:
        self.log = self.opened()

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
        crash = data.draw(st.booleans())
        if crash:
            self._crash_before_manifest(lambda: self.log.replace(group, [batch_from_records(keep)]))
            return
        self.log.replace(group, [batch_from_records(keep)])
        kept = {r["offset"] for r in keep}
        self.model = [r for r in self.model if not (lo <= r["offset"] < hi) or r["offset"] in kept]
        assert self.log.log_end_offset == self.end

    def _crash_before_manifest(self, change) -> None:
        """The process dies after the change's objects are written, before its manifest: reopened, the log
        is what it was (the invariant checks it against the unchanged model)."""
        def dies(*_a, **_k):
            raise SimulatedCrash

        self.log.storage = PatchedStorage(self.storage, put_if_absent=dies)
        with pytest.raises(SimulatedCrash):
            change()
        self.reopen()

    @rule(data=st.data())
    def crash_between_objects_and_manifest(self, data) -> None:
        batch = _records(self.end, data.draw(st.lists(st.integers(0, 2), min_size=1, max_size=30)), data)
        now = self.tick(data)
        self._crash_before_manifest(lambda: self.log.append(batch, now_ms=now))

    @rule(data=st.data())
    def crash_while_writing_an_object(self, data) -> None:
        batch = _records(self.end, data.draw(st.lists(st.integers(0, 2), min_size=1, max_size=30)), data)
        real_put = self.storage.put

        def torn(path: str, blob: bytes) -> None:
            if data.draw(st.booleans()):
                raise SimulatedCrash
            real_put(path, blob)

        self.log.storage = PatchedStorage(self.storage, put=torn)
        try:
            self.log.append(batch, now_ms=self.tick(data))
        except SimulatedCrash:
            self.reopen()
            return
        self.log.storage = self.storage
        self.model.extend(batch)
        self.end = batch[-1]["offset"] + 1

    @rule()
    def a_zombie_opens_the_log(self) -> None:
        self.zombie = self.opened()

    @precondition(lambda self: self.zombie is not None)
    @rule(data=st.data())
    def the_zombie_writes(self, data) -> None:
        zombie, self.zombie = self.zombie, None
        if zombie.version == self.log.version:  # nothing committed since it opened: it is no zombie yet
            return
        batch = _records(self.end, [0], data)
        with pytest.raises(LogFencedError, match="fenced"):
            zombie.append(batch, now_ms=self.tick(data))
        if len(zombie.segments) > 1:
            with pytest.raises(LogFencedError):
                zombie.replace(zombie.segments[:1], [])

    @rule()
    def garbage_is_collected(self) -> None:
        self.log.collect_garbage(grace_ms=0)
        self.reopen()
        kept = set()
        for info in self.storage.list(manifest_dir(self.dir)):
            with contextlib.suppress(ValueError):
                manifest = Manifest.from_json(self.storage.get(f"{manifest_dir(self.dir)}/{info.name}"))
                kept |= {c.name for s in manifest.segments for c in s.chunks}
        assert len(self.storage.list(manifest_dir(self.dir))) <= KEEP_MANIFESTS
        assert {i.name for i in self.storage.list(objects_dir(self.dir))} <= kept, "what no kept manifest names goes"

    @rule(data=st.data())
    def newest_manifest_is_unreadable(self, data) -> None:
        newest = self.storage.list(manifest_dir(self.dir))
        version = int(newest[-1].name.split(".")[0]) + 1 if newest else 0
        self.storage.put(f"{manifest_dir(self.dir)}/{version:020d}.json", b'{"format": 1, "vers')
        self.reopen()
        assert self.log.recovery.invalid_manifests == [f"{version:020d}.json"]
        batch = _records(self.end, [0], data)
        self.log.append(batch, now_ms=self.clock)
        assert self.log.version == version + 1, "the next commit goes above the unreadable one"
        self.model.extend(batch)
        self.end = batch[-1]["offset"] + 1

    @rule()
    def clean_reopen(self) -> None:
        self.reopen()
        assert not self.log.recovery.damaged

    @invariant()
    def reads_back_the_model(self) -> None:
        if not hasattr(self, "log"):
            return
        got = list(self.log.read(0))
        assert [r["offset"] for r in got] == [r["offset"] for r in self.model]
        assert got == self.model
        if self.model:  # a range read, its ends on records and between them
            lo, hi = self.model[len(self.model) // 3]["offset"], self.model[2 * len(self.model) // 3]["offset"]
            for a, b in ((lo, hi), (lo + 1, hi + 1), (lo, lo)):
                assert list(self.log.read(a, b)) == [r for r in self.model if a <= r["offset"] < b], (a, b)
        assert self.log.log_end_offset == self.end
        segs = self.log.segments
        for a, b in zip(segs, segs[1:], strict=False):
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
