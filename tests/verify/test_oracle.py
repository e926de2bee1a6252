"""The verifier's judgement against the reference model: a sink made of the model's winners passes, and each
way a sink can go wrong is named by key."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from streaming.cleaner.config import Strategy
from streaming.verify.oracle import PendingWinners, SinkLatest, SinkRecord, SourceWinners, judge
from tests.cleaner.reference_model import rank

HEADER = "v"


@st.composite
def source_records(draw) -> list[dict]:
    n = draw(st.integers(1, 60))
    out = []
    for offset in range(n):
        key = draw(st.sampled_from([None, b"a", b"b", b"c", b"\xff\x00"]))
        value = draw(st.sampled_from([None, b"x", b"y", b"z"]))
        version = draw(st.one_of(st.none(), st.integers(-3, 3)))
        headers = [] if version is None else [{"key": HEADER, "value": version.to_bytes(8, "big", signed=True)}]
        out.append({"offset": offset, "key": key, "value": value, "timestamp": draw(st.integers(0, 5)),
                    "headers": headers})
    return out


def fold(records: list[dict], strategy: Strategy) -> SourceWinners:
    winners = SourceWinners(strategy, HEADER)
    for r in records:
        winners.add(r["key"], r["value"], r["timestamp"], [(h["key"], h["value"]) for h in r["headers"]], r["offset"])
    return winners


def model_sink(records: list[dict], strategy: Strategy) -> list[dict]:
    """What the compactor emits in one pass: each key's winner (the model's rank), in source-offset order."""
    best: dict[bytes, dict] = {}
    for r in records:
        if r["key"] is not None and (r["key"] not in best or rank(r, strategy.value, HEADER) >
                                     rank(best[r["key"]], strategy.value, HEADER)):
            best[r["key"]] = r
    return sorted(best.values(), key=lambda r: r["offset"])


def sink_of(records: list[dict]) -> SinkLatest:
    latest = SinkLatest()
    for i, r in enumerate(records):
        latest.add(SinkRecord(r["key"], r["value"], r["offset"], i))
    return latest


@settings(max_examples=200, deadline=None)
@given(source_records(), st.sampled_from(list(Strategy)))
def test_the_models_winners_pass_and_a_missing_live_winner_is_named(records, strategy) -> None:
    emitted = model_sink(records, strategy)
    up_to = [r for r in records if r["offset"] <= max((e["offset"] for e in emitted), default=-1)]
    verdict = judge("s", "k", 0, fold(up_to, strategy), sink_of(emitted), 0)
    assert verdict.ok, verdict.named
    live = [r for r in emitted if r["value"] is not None]
    if live:
        missing = live[len(live) // 2]
        broken = judge("s", "k", 0, fold(up_to, strategy), sink_of([r for r in emitted if r is not missing]), 0)
        assert not broken.ok
        assert any(repr(missing["key"].decode("utf-8", "replace")) in m or missing["key"].hex() in m
                   for m in broken.named), broken.named


def test_an_older_record_appended_to_the_sink_is_named_with_its_key() -> None:
    records = [{"offset": o, "key": k, "value": v, "timestamp": 0, "headers": []}
               for o, (k, v) in enumerate([(b"a", b"1"), (b"b", b"1"), (b"a", b"2"), (b"b", b"2")])]
    emitted = model_sink(records, Strategy.OFFSET)
    stale = {"offset": 0, "key": b"a", "value": b"1"}  # a plain producer's copy of a superseded record
    verdict = judge("s", "k", 0, fold(records, Strategy.OFFSET), sink_of(emitted + [stale]), 0)
    assert not verdict.ok and verdict.mismatches == 2
    assert "kcompact.offset 0 does not increase (after 3)" in verdict.named[0]
    assert verdict.named[1] == "key 'a': source winner offset 2 (value), sink has offset 0 (value)"


def test_a_tombstone_and_no_record_are_the_same_and_a_deleted_source_range_is_not_judged() -> None:
    records = [{"offset": 5, "key": b"a", "value": None, "timestamp": 0, "headers": []},
               {"offset": 6, "key": b"b", "value": b"1", "timestamp": 0, "headers": []}]
    sink = sink_of([{"offset": 2, "key": b"gone", "value": b"old"}, records[1]])  # the sink's tombstone removed
    verdict = judge("s", "k", 0, fold(records, Strategy.OFFSET), sink, log_start=5)
    assert verdict.ok and verdict.keys == 2 and verdict.progress == 6


def test_a_sink_record_without_its_source_offset_and_a_changed_value_are_faults() -> None:
    records = [{"offset": 0, "key": b"a", "value": b"1", "timestamp": 0, "headers": []}]
    sink = SinkLatest()
    sink.add(SinkRecord(b"a", b"other", 0, 0))
    sink.add(SinkRecord(b"z", b"foreign", None, 1))
    verdict = judge("s", "k", 0, fold(records, Strategy.OFFSET), sink, 0, source_end=1)
    assert verdict.named == ("sink offset 1 has no kcompact.offset header",
                             "key 'a': source winner offset 0 (value), sink has offset 0 (value) (value differs)")
    assert verdict.line().startswith("FAIL s-0 -> k-0: checked 1 source records up to offset 0 of the source's end "
                                     "1, caught up; 1 keys, 2 sink records, 2 mismatches, winners ")


def test_what_the_sink_is_owed_is_the_keys_whose_winner_lies_past_its_progress() -> None:
    """Past the progress: a new key and a higher version are owed; a lower version of a key judged already
    never reaches the sink, and a keyless record is never a winner."""
    def record(offset: int, key: bytes | None, version: int) -> dict:
        return {"offset": offset, "key": key, "value": b"v", "timestamp": 0,
                "headers": [{"key": HEADER, "value": version.to_bytes(8, "big", signed=True)}]}

    judged = fold([record(0, b"a", 5), record(1, b"b", 5)], Strategy.HEADER)
    pending = PendingWinners(judged)
    for r in (record(2, b"a", 3), record(3, b"b", 9), record(4, b"c", 1), record(5, None, 7)):
        pending.add(r["key"], r["timestamp"], [(h["key"], h["value"]) for h in r["headers"]], r["offset"])
    sink = SinkLatest()
    sink.add(SinkRecord(b"a", b"v", 0, 0))
    sink.add(SinkRecord(b"b", b"v", 1, 1))
    verdict = judge("s", "k", 0, judged, sink, 0, pending=pending, source_end=6)
    assert (verdict.ok, verdict.behind, verdict.owed) == (True, True, 2)
    assert verdict.line().startswith("LAG  s-0 -> k-0: checked 2 source records up to offset 1 of the source's end 6, "
                                     "lag 2 winners not in the sink yet; ")


def test_the_digest_follows_the_live_winners_only() -> None:
    a = fold([{"offset": 0, "key": b"a", "value": b"1", "timestamp": 0, "headers": []}], Strategy.OFFSET)
    b = fold([{"offset": 0, "key": b"a", "value": b"1", "timestamp": 0, "headers": []},
              {"offset": 1, "key": b"t", "value": None, "timestamp": 0, "headers": []}], Strategy.OFFSET)
    c = fold([{"offset": 0, "key": b"a", "value": b"2", "timestamp": 0, "headers": []}], Strategy.OFFSET)
    assert a.digest() == b.digest() != c.digest()
