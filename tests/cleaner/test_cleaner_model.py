"""Property test: after any sequence of appends, rolls and passes, the log equals the reference model.

Random logs, configs, clock advances, all three strategies and tiny dedupe buffers (many partial passes).
"""

from __future__ import annotations

import shutil
import tempfile

import hypothesis.strategies as st
from hypothesis import HealthCheck, settings
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from streaming.cleaner import Cleaner, CompactionConfig, KeylessPolicy, PartitionId, log_to_clean
from streaming.log import PartitionLog, make_record
from tests.cleaner.reference_model import clean as model_clean

HEADER = "version"
PID = PartitionId("topic", 0)


@st.composite
def header_lists(draw):
    kind = draw(st.sampled_from(["none", "ok", "ok", "bad", "twice"]))
    if kind == "none":
        return []
    v = draw(st.integers(-3, 3)).to_bytes(8, "big", signed=True)
    if kind == "bad":
        return [(HEADER, draw(st.sampled_from([None, b"", b"\x01\x02"])))]
    if kind == "twice":
        return [(HEADER, b"\x00" * 8), ("other", b"x"), (HEADER, v)]
    return [(HEADER, v)]


class CleanerMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = tempfile.mkdtemp(prefix="kcompact-clean-")
        self.model: list[dict] = []
        self.end = 0
        self.now = 0

    def teardown(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)

    @initialize(strategy=st.sampled_from(["offset", "timestamp", "header"]),
                buffer=st.integers(48, 600), segment_bytes=st.integers(60, 1500),
                ratio=st.sampled_from([0.0, 0.3, 0.5, 0.9, 1.0]), retention=st.integers(0, 2000),
                min_lag=st.sampled_from([0, 0, 500]), max_lag=st.sampled_from([1000, 10_000, 2**63 - 1]),
                keyless=st.sampled_from([KeylessPolicy.DROP, KeylessPolicy.DEAD_LETTER]))
    def configure(self, strategy, buffer, segment_bytes, ratio, retention, min_lag, max_lag, keyless) -> None:
        self.cfg = CompactionConfig.from_mapping({
            "compaction.strategy": strategy, "log.cleaner.dedupe.buffer.size": str(buffer),
            "segment.bytes": str(segment_bytes), "min.cleanable.dirty.ratio": str(ratio),
            "delete.retention.ms": str(retention), "min.compaction.lag.ms": str(min_lag),
            "max.compaction.lag.ms": str(max(max_lag, min_lag)), "compaction.keyless.policy": keyless.value,
            **({"compaction.strategy.header": HEADER} if strategy == "header" else {})})
        self.log = PartitionLog(self.dir, self.cfg.log_config, jitter_seed="topic-0")
        self.cleaner = Cleaner(self.cfg)

    @rule(data=st.data(), n=st.integers(1, 25))
    def append(self, data, n: int) -> None:
        batch = []
        for _ in range(n):
            self.end += data.draw(st.integers(0, 2))
            key = data.draw(st.one_of(st.none(), st.sampled_from([b"a", b"b", b"c", b"d", b"e", b"f"])), label="key") \
                if data.draw(st.integers(0, 9)) == 0 else data.draw(st.sampled_from([b"a", b"b", b"c", b"d", b"e", b"f"]))
            value = data.draw(st.one_of(st.none(), st.binary(min_size=1, max_size=8)))
            ts = self.now + data.draw(st.integers(-300, 50))
            batch.append(make_record(self.end, key, value, ts, data.draw(header_lists())))
            self.end += 1
        self.log.append(batch, now_ms=self.now)
        self.model.extend(dict(r) for r in batch)

    @rule(dt=st.integers(0, 3000))
    def tick(self, dt: int) -> None:
        self.now += dt
        self.log.maybe_roll(self.now)

    @rule()
    def roll(self) -> None:
        self.log.roll()

    @rule()
    def reopen(self) -> None:
        self.log = PartitionLog(self.dir, self.cfg.log_config, jitter_seed="topic-0")

    @rule()
    def clean(self) -> None:
        target = log_to_clean(self.log.segments, PID, self.log.cleaner_checkpoint, self.cfg, self.now)
        if not target.eligible(self.cfg.min_cleanable_dirty_ratio):
            return
        result = self.cleaner.clean(self.log, target, self.now)
        assert target.first_dirty_offset <= result.end_offset <= target.first_uncleanable_offset
        if target.cleanable_bytes:
            assert result.end_offset > target.first_dirty_offset, "every pass makes progress"
        before = self.model
        self.model = model_clean(before, target.first_dirty_offset, result.end_offset, self.now,
                                 self.cfg.delete_retention_ms, self.cfg.compaction_strategy.value,
                                 self.cfg.compaction_strategy_header)
        expected_survivors = [r for r in self.model if target.first_dirty_offset <= r["offset"] < result.end_offset]
        assert list(result.survivors()) == expected_survivors
        dropped_keyless = [r for r in before if r["key"] is None and target.first_dirty_offset <= r["offset"] < result.end_offset]
        assert result.keyless == len(dropped_keyless)
        if self.cfg.keyless_policy is KeylessPolicy.DEAD_LETTER:
            assert result.dead_letters == dropped_keyless
        assert self.log.cleaner_checkpoint == result.end_offset

    @invariant()
    def log_equals_model(self) -> None:
        if hasattr(self, "log"):
            assert list(self.log.read()) == self.model
            assert self.log.log_end_offset >= (self.model[-1]["offset"] + 1 if self.model else 0)


CleanerMachine.TestCase.settings = settings(max_examples=200, stateful_step_count=40, deadline=None,
                                            suppress_health_check=[HealthCheck.too_slow])
TestCleanerAgainstModel = CleanerMachine.TestCase
