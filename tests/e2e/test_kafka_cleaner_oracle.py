"""Apache Kafka's own log cleaner as the oracle for the offset strategy.

One change stream (updates and tombstones over several partitions) goes into a source topic with
cleanup.policy=compact and settings under which the broker cleans it within seconds. The compactor runs on
that same topic; it takes the same settings from the topic itself. Once the broker has cleaned every record
of the stream, what Kafka kept (offset, key, value) must equal the latest-per-key view of the sink.
"""

from __future__ import annotations

import random
import time
from collections import Counter

import pytest

from streaming.kafka.admin import unique_topic_name
from tests.e2e.helpers import read_topic, run_once
from tests.kafka_helpers import Sent, produce

pytestmark = pytest.mark.integration

PARTITIONS = 3
KEYS = 150
# segment.ms rolls a segment at the first append 100 ms after it began, so the stream spans many segments;
# the ratio and the lag make any dirty segment cleanable at once on both sides.
TOPIC_CONFIG = {"cleanup.policy": "compact", "segment.ms": "100", "min.cleanable.dirty.ratio": "0.01",
                "min.compaction.lag.ms": "0", "max.compaction.lag.ms": "1000", "delete.retention.ms": "86400000"}


def _change_stream(rng: random.Random, waves: int, per_wave: int) -> list[list[Sent]]:
    out = []
    for w in range(waves):
        wave = []
        for i in range(per_wave):
            key = b"key-%d" % rng.randrange(KEYS)
            value = None if rng.random() < 0.12 else b"value-%d-%d" % (w, i)
            wave.append(Sent(rng.randrange(PARTITIONS), key, value, int(time.time() * 1000)))
        out.append(wave)
    return out


def _kept_by_kafka(bootstrap: str, topic: str, ends: dict[int, int]) -> dict[int, list[tuple]]:
    """Every record the broker holds below each partition's end, as (offset, key, value)."""
    held = read_topic(bootstrap, topic, len(ends))
    return {p: [(r["offset"], r["key"], r["value"]) for r in held[p] if r["offset"] < end] for p, end in ends.items()}


def _cleaned(records: list[tuple]) -> bool:
    """Kafka never removes a key's last record, so no key twice means every older record is gone."""
    return all(n == 1 for n in Counter(k for _, k, _ in records).values())


def test_sink_equals_what_kafkas_cleaner_keeps(bootstrap_servers, new_topic, tmp_path) -> None:
    source, sink = new_topic(partitions=PARTITIONS, config=TOPIC_CONFIG, prefix="oracle"), unique_topic_name("sink")
    sent: list[Sent] = []
    for wave in _change_stream(random.Random(280), waves=6, per_wave=700):
        sent += produce(bootstrap_servers, source, wave)
        time.sleep(0.15)  # the next wave starts a new segment
    time.sleep(0.15)
    # One last record per partition rolls the broker's active segment, so the whole stream is cleanable there.
    ends = {s.partition: s.offset for s in produce(bootstrap_servers, source, [
        Sent(p, b"end-of-stream", b"end", int(time.time() * 1000)) for p in range(PARTITIONS)])}
    time.sleep(1.1)  # past max.compaction.lag.ms: the compactor cleans its whole log in one run
    assert run_once(bootstrap_servers, source, sink, str(tmp_path)) == 0

    deadline = time.monotonic() + 180
    kept = _kept_by_kafka(bootstrap_servers, source, ends)
    while not all(_cleaned(kept[p]) for p in kept):
        assert time.monotonic() < deadline, "the broker's cleaner did not clean the stream within 180 s"
        time.sleep(2)
        kept = _kept_by_kafka(bootstrap_servers, source, ends)

    got = read_topic(bootstrap_servers, sink, PARTITIONS)
    for p in range(PARTITIONS):
        stream = [s for s in sent if s.partition == p]
        assert len(kept[p]) < len(stream), f"partition {p}: the broker cleaned nothing"
        latest: dict[bytes, tuple] = {}
        for r in got[p]:
            latest[r["key"]] = (r["source_offset"], r["key"], r["value"])
        ours = sorted(v for k, v in latest.items() if k != b"end-of-stream")
        assert ours == kept[p], f"partition {p}: the sink's latest-per-key differs from what Kafka kept"
        assert any(v is None for _, _, v in ours), "tombstones are part of the comparison"
