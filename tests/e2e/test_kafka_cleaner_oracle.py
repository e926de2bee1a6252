"""Apache Kafka's own log cleaner as the oracle for the offset strategy.

A change stream (updates and tombstones over several partitions) goes into two twin topics with the same
records at the same offsets: the oracle, with cleanup.policy=compact and settings under which the broker
cleans it within seconds, and the compactor's source, with the same settings but cleanup.policy=delete, so
the compactor reads the stream whole, never a stream the broker already cleaned. The compactor takes its
settings from its source topic. Once the broker has cleaned the oracle, what Kafka kept (offset, key,
value, in order) must equal the sink record for record: nothing missing, nothing twice. Besides the plain case: a dedupe buffer that holds a third of the keys (several passes in
one run must still emit only the final winners), tombstones past delete.retention.ms (both drop them at
their horizon, KIP-534), and min.compaction.lag.ms above zero (both leave young records dirty, KIP-58).
"""

from __future__ import annotations

import dataclasses
import random
import time
from collections import Counter
from dataclasses import dataclass

import pytest

from streaming.kafka.admin import unique_topic_name
from tests.e2e.helpers import NO_SINK_COMPACTION, dump_json, read_topic, run_once, status_json, wait_for
from tests.kafka_helpers import Sent, produce

pytestmark = pytest.mark.integration

PARTITIONS = 3
KEYS = 150
END = b"end-of-stream"
# segment.ms rolls a segment at the first append 100 ms after it began, so the stream spans many segments;
# the ratio and the lag make any dirty segment cleanable at once on both sides.
TOPIC_CONFIG = {"cleanup.policy": "compact", "segment.ms": "100", "min.cleanable.dirty.ratio": "0.01",
                "min.compaction.lag.ms": "0", "max.compaction.lag.ms": "1000", "delete.retention.ms": "86400000"}
CLEANED_WITHIN_S = 180


def _change_stream(rng: random.Random, waves: int, per_wave: int, at_ms=None, tombstones: float = 0.12,
                   keys: int = KEYS) -> list[list[Sent]]:
    out = []
    for w in range(waves):
        wave = []
        for i in range(per_wave):
            key = b"key-%d" % rng.randrange(keys)
            value = None if rng.random() < tombstones else b"value-%d-%d" % (w, i)
            ts = int(time.time() * 1000) if at_ms is None else at_ms + w * per_wave + i
            wave.append(Sent(rng.randrange(PARTITIONS), key, value, ts))
        out.append(wave)
    return out


@dataclass(frozen=True)
class Twins:
    """The compactor's source and Kafka's compacted oracle: the same records at the same offsets."""

    bootstrap: str
    source: str
    oracle: str

    @classmethod
    def make(cls, bootstrap: str, new_topic, config: dict[str, str]) -> "Twins":
        oracle = new_topic(partitions=PARTITIONS, config=config, prefix="oracle")
        source = new_topic(partitions=PARTITIONS, config={**config, "cleanup.policy": "delete"}, prefix="source")
        return cls(bootstrap, source, oracle)

    def produce(self, records: list[Sent]) -> list[Sent]:
        twins = produce(self.bootstrap, self.oracle, [dataclasses.replace(r) for r in records])
        sent = produce(self.bootstrap, self.source, records)
        assert [r.offset for r in twins] == [r.offset for r in sent], "the twins hold the same offsets"
        return sent

    def produce_waves(self, waves: list[list[Sent]]) -> list[Sent]:
        sent: list[Sent] = []
        for wave in waves:
            sent += self.produce(wave)
            time.sleep(0.15)  # the next wave starts a new segment
        return sent

    def end_of_stream(self) -> dict[int, int]:
        """One last record per partition rolls the broker's active segment, so what came before is cleanable
        there; returns each partition's offset of it. Each marker has a key of its own: the broker never
        cleans its active segment, where a marker stays, so a later marker of the same key would remove an
        earlier one in the compactor's log (which seals the marker with the rest at --once) but not in the
        broker's."""
        time.sleep(0.15)
        key = END + b"-%d" % time.time_ns()
        return {s.partition: s.offset for s in self.produce([Sent(p, key, b"end", int(time.time() * 1000))
                                                             for p in range(PARTITIONS)])}


def _kept_by_kafka(bootstrap: str, topic: str, ends: dict[int, int]) -> dict[int, list[tuple]]:
    """Every record the broker holds below each partition's end, as (offset, key, value)."""
    held = read_topic(bootstrap, topic, len(ends))
    return {p: [(r["offset"], r["key"], r["value"]) for r in held[p] if r["offset"] < end] for p, end in ends.items()}


def _no_key_twice(records: list[tuple]) -> bool:
    """Kafka never removes a key's last record, so no key twice means every older record is gone."""
    return all(n == 1 for n in Counter(k for _, k, _ in records).values())


def _wait_cleaned(bootstrap: str, topic: str, ends: dict[int, int], cleaned=None) -> dict[int, list[tuple]]:
    """What Kafka keeps below ``ends`` once ``cleaned(partition, kept records)`` holds for every partition (by
    default: no key twice)."""
    def kept():
        found = _kept_by_kafka(bootstrap, topic, ends)
        return found if all((cleaned or (lambda _, rs: _no_key_twice(rs)))(p, found[p]) for p in found) else None
    return wait_for(kept, CLEANED_WITHIN_S, "Kafka's cleaner cleaned the stream", pause_s=2)


def _sink(bootstrap: str, sink: str, lo: dict[int, int], hi: dict[int, int]) -> dict[int, list[tuple]]:
    """The sink's records of source offsets in [lo, hi), raw: (source offset, key, value) in sink order."""
    got = read_topic(bootstrap, sink, PARTITIONS)
    return {p: [(r["source_offset"], r["key"], r["value"]) for r in got.get(p, [])
                if lo[p] <= r["source_offset"] < hi[p]] for p in range(PARTITIONS)}


def _log(state_dir: str, capsys, below: dict[int, int]) -> dict[int, list[tuple]]:
    """The compactor's own log below ``below``, as (offset, key, value)."""
    dumped = dump_json(state_dir, capsys)
    return {p: [(r["offset"], r["key"].encode(), None if r["value"] is None else r["value"].encode())
                for r in dumped if r["partition"] == p and r["offset"] < below[p]] for p in range(PARTITIONS)}


@pytest.mark.parametrize("dedupe_buffer", [None, 24 * 112], ids=["one-pass", "several-passes"])
def test_sink_equals_what_kafkas_cleaner_keeps(bootstrap_servers, new_topic, tmp_path, capsys, dedupe_buffer) -> None:
    """A buffer of 112 slots maps 100 keys a pass (90% load), two thirds of each partition's keys: one stage
    makes several passes (fewer than its cap of 16), and the sink must still receive only each key's final
    winner, once."""
    twins, sink = Twins.make(bootstrap_servers, new_topic, TOPIC_CONFIG), unique_topic_name("sink")
    sent = twins.produce_waves(_change_stream(random.Random(280), waves=6, per_wave=700))
    ends = twins.end_of_stream()
    time.sleep(1.1)  # past max.compaction.lag.ms: the compactor cleans its whole log in one run
    config = () if dedupe_buffer is None else (f"log.cleaner.dedupe.buffer.size={dedupe_buffer}",)
    assert run_once(bootstrap_servers, twins.source, sink, str(tmp_path), *config) == 0

    passes = [p["passes"] for p in status_json(str(tmp_path), capsys)["partitions"]]
    assert all(n >= (1 if dedupe_buffer is None else 3) for n in passes), passes
    kept = _wait_cleaned(bootstrap_servers, twins.oracle, ends)
    got = _sink(bootstrap_servers, sink, {p: 0 for p in ends}, ends)
    for p in range(PARTITIONS):
        assert len(kept[p]) < len([s for s in sent if s.partition == p]), f"partition {p}: the broker cleaned nothing"
        assert got[p] == kept[p], f"partition {p}: the sink differs from what Kafka kept"
        assert any(v is None for _, _, v in kept[p]), "tombstones are part of the comparison"


def test_tombstones_past_delete_retention_leave_both_logs(bootstrap_servers, new_topic, tmp_path, capsys) -> None:
    """Both set a tombstone's horizon when they first clean it and drop it in a pass after the horizon. The
    sink got the tombstones when they won; the later records agree with Kafka again."""
    retention_ms = 8000
    config = {**TOPIC_CONFIG, "delete.retention.ms": str(retention_ms)}
    twins, sink = Twins.make(bootstrap_servers, new_topic, config), unique_topic_name("sink")
    rng = random.Random(534)
    twins.produce_waves(_change_stream(rng, waves=3, per_wave=600, tombstones=0.3))
    first_ends = twins.end_of_stream()
    time.sleep(1.1)
    # an uncompacted sink (NO_SINK_COMPACTION): a sink takes its source's delete.retention.ms, so its own cleaner
    # would drop the tombstones read here at a moment of its choosing, not the oracle's
    assert run_once(bootstrap_servers, twins.source, sink, str(tmp_path), sink_config=NO_SINK_COMPACTION) == 0
    kept = _wait_cleaned(bootstrap_servers, twins.oracle, first_ends)
    cleaned_by = time.time()
    got = _sink(bootstrap_servers, sink, {p: 0 for p in first_ends}, first_ends)
    for p in range(PARTITIONS):
        assert got[p] == kept[p], f"partition {p}: the sink differs from what Kafka kept"
        assert any(v is None for _, _, v in kept[p]), f"partition {p}: tombstones kept before their horizon"

    time.sleep(max(0.0, cleaned_by + retention_ms / 1000 + 1 - time.time()))  # both horizons have passed
    twins.produce_waves(_change_stream(rng, waves=1, per_wave=300, tombstones=0.0, keys=2 * KEYS))
    ends = twins.end_of_stream()
    time.sleep(1.1)
    assert run_once(bootstrap_servers, twins.source, sink, str(tmp_path), sink_config=NO_SINK_COMPACTION) == 0
    kept = _wait_cleaned(bootstrap_servers, twins.oracle, ends,
                         lambda _, rs: _no_key_twice(rs) and not any(v is None for _, _, v in rs))
    ours = _log(str(tmp_path), capsys, ends)
    got = _sink(bootstrap_servers, sink, first_ends, ends)
    for p in range(PARTITIONS):
        assert ours[p] == kept[p], f"partition {p}: the compactor's log differs from what Kafka kept"
        assert got[p] == [r for r in kept[p] if r[0] >= first_ends[p]], f"partition {p}: the second run's sink"


def test_young_records_stay_dirty_on_both_sides(bootstrap_servers, new_topic, tmp_path, capsys) -> None:
    """min.compaction.lag.ms: records two hours old are cleaned; records of a few seconds ago are not, on
    either side, so the sink holds the old records' winners among themselves and nothing young."""
    config = {**TOPIC_CONFIG, "min.compaction.lag.ms": "60000", "max.compaction.lag.ms": "120000"}
    twins, sink = Twins.make(bootstrap_servers, new_topic, config), unique_topic_name("sink")
    rng = random.Random(58)
    old = twins.produce_waves(_change_stream(rng, waves=2, per_wave=500, at_ms=int(time.time() * 1000) - 7_200_000))
    assert run_once(bootstrap_servers, twins.source, sink, str(tmp_path)) == 0
    young = twins.produce_waves(_change_stream(rng, waves=1, per_wave=300))
    ends = twins.end_of_stream()  # seals the young records' segment on the broker
    assert run_once(bootstrap_servers, twins.source, sink, str(tmp_path)) == 0

    first_young = {p: min(s.offset for s in young if s.partition == p) for p in range(PARTITIONS)}
    kept = _wait_cleaned(bootstrap_servers, twins.oracle, ends,
                         lambda p, rs: _no_key_twice([r for r in rs if r[0] < first_young[p]]))
    ours = _log(str(tmp_path), capsys, ends)
    got = _sink(bootstrap_servers, sink, {p: 0 for p in ends}, ends)
    for p in range(PARTITIONS):
        assert len(kept[p]) < len([s for s in old + young if s.partition == p])
        assert [r for r in kept[p] if r[0] >= first_young[p]] == \
            [(s.offset, s.key, s.value) for s in young if s.partition == p], f"partition {p}: young records kept"
        assert ours[p] == kept[p], f"partition {p}: the compactor's log differs from what Kafka kept"
        assert got[p] == [r for r in kept[p] if r[0] < first_young[p]], f"partition {p}: only old winners emitted"
