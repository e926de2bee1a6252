"""Running the compactor through its CLI and reading the sink, for the end-to-end tests."""

from __future__ import annotations

import json
import time
from collections import Counter

from confluent_kafka import Consumer, TopicPartition

from streaming.cli.main import main
from streaming.kafka.emitter import OFFSET_HEADER, source_offset
from tests.cleaner.reference_model import rank

NO_SINK_COMPACTION = ["--sink-topic-config", "cleanup.policy=delete", "--sink-topic-config", "retention.ms=-1"]


def run_once(bootstrap: str, source: str, sink: str, state_dir: str, *config: str, extra: tuple = ()) -> int:
    """`kcompact run --once` in this process (it shares the test session's SparkSession).

    The sink topic is created without broker-side compaction so the test sees exactly what was emitted.
    """
    args = ["run", "--bootstrap-servers", bootstrap, "--source-topic", source, "--sink-topic", sink,
            "--state-dir", state_dir, "--once", *NO_SINK_COMPACTION, *extra]
    for c in config:
        args += ["--config", c]
    return main(args)


def read_topic(bootstrap: str, topic: str, partitions: int, timeout_s: float = 30) -> dict[int, list[dict]]:
    """Every committed record of every partition, as dicts with its offset and the sink contract's fields."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"read-{topic}-{time.time_ns()}",
                         "enable.auto.commit": False, "isolation.level": "read_committed"})
    out: dict[int, list[dict]] = {}
    try:
        if topic not in consumer.list_topics(timeout=timeout_s).topics:
            return out  # not created yet (the job creates the sink when it starts)
        for p in range(partitions):
            tp = TopicPartition(topic, p)
            _, high = consumer.get_watermark_offsets(tp, timeout=timeout_s, cached=False)
            consumer.assign([TopicPartition(topic, p, 0)])
            records = []
            deadline = time.monotonic() + timeout_s
            while high and consumer.position([tp])[0].offset < high and time.monotonic() < deadline:
                for m in consumer.consume(500, timeout=1):
                    assert m.error() is None, m.error()
                    records.append({"offset": m.offset(), "key": m.key(), "value": m.value(),
                                    "timestamp": m.timestamp()[1], "headers": m.headers() or [],
                                    "source_offset": source_offset(m.headers())})
            out[p] = records
    finally:
        consumer.close()
    return out


def winners(sent, strategy: str = "offset", header: str | None = None, up_to: int | None = None) -> list:
    """The reference model for one pass over everything: each key's winner, in source-offset order.

    ``sent`` are tests.kafka_helpers.Sent records of one partition.
    """
    best: dict[bytes, tuple] = {}
    for s in sent:
        if s.key is None or (up_to is not None and s.offset >= up_to):
            continue
        r = {"offset": s.offset, "timestamp": s.timestamp,
             "headers": [{"key": k, "value": v} for k, v in s.headers]}
        k = rank(r, strategy, header)
        if s.key not in best or k > best[s.key][0]:
            best[s.key] = (k, s)
    return sorted((s for _, s in best.values()), key=lambda s: s.offset)


def sink_view(records: list[dict]) -> list[tuple]:
    return [(r["source_offset"], r["key"], r["value"]) for r in records]


def sent_view(sent) -> list[tuple]:
    return [(s.offset, s.key, s.value) for s in sent]


def status_json(state_dir: str, capsys) -> dict:
    capsys.readouterr()
    assert main(["status", "--state-dir", state_dir, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def dump_json(state_dir: str, capsys) -> list[dict]:
    capsys.readouterr()
    assert main(["dump", "--state-dir", state_dir]) == 0
    return [json.loads(line) for line in capsys.readouterr().out.splitlines()]


def offsets_diff(got: list[int], want: list[int]) -> str:
    """A short account of how two offset lists differ, as runs: a failing 100k-offset comparison would
    otherwise print both lists and hide the one gap that matters."""

    def runs(offsets: list[int]) -> str:
        spans: list[list[int]] = []
        for o in sorted(offsets):
            if spans and o == spans[-1][1] + 1:
                spans[-1][1] = o
            else:
                spans.append([o, o])
        shown = ", ".join(f"{a}-{b}" if a != b else str(a) for a, b in spans[:10])
        return f"{len(offsets)} ({shown}{', ...' if len(spans) > 10 else ''})"

    counts = Counter(got)
    twice = [o for o, n in counts.items() for _ in range(n - 1)]
    missing = sorted(set(want) - counts.keys())
    extra = sorted(counts.keys() - set(want))
    return f"missing {runs(missing)}; twice {runs(twice)}; unexpected {runs(extra)}; {len(got)} got, {len(want)} wanted"


def assert_sink_contract(bootstrap: str, sink: str, sent, partitions: int) -> None:
    """What must hold whatever the timing of crashes and outages: per partition strictly increasing source
    offsets (nothing twice, order kept), every sink record identical to its source record, and for every
    key the last sink record is the key's final winner (nothing lost)."""
    by_offset = {(s.partition, s.offset): s for s in sent}
    got = read_topic(bootstrap, sink, partitions)
    for p in range(partitions):
        offsets = [r["source_offset"] for r in got[p]]
        assert offsets == sorted(set(offsets)), f"partition {p}: a record was emitted twice or out of order"
        for r in got[p]:
            s = by_offset[(p, r["source_offset"])]
            assert (r["key"], r["value"], r["timestamp"]) == (s.key, s.value, s.timestamp)
            assert r["headers"] == s.headers + [(OFFSET_HEADER, str(s.offset).encode())]
        last_per_key = {}
        for r in got[p]:
            last_per_key[r["key"]] = r["source_offset"]
        final_winners = {s.key: s.offset for s in winners([s for s in sent if s.partition == p])}
        assert last_per_key == final_winners, f"partition {p}: the sink lost a key's latest value"
