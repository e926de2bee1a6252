"""State dirs for the table tests, written as the job writes them (its saved spec, partition logs cleaned by
the cleaner), with the records each log was given, so the reference model can say what the table holds."""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field

from streaming.cleaner import CompactionConfig, LogCleanerManager
from streaming.job.spec import JobMapping, JobSpec, TopicPlan
from streaming.log import make_record
from streaming.partition_id import PartitionId
from streaming.state.layout import LogDir, open_partition_log
from streaming.state.stores import open_state_dir
from streaming.configuration.subscription import Subscribe

HEADER = "version"
STRATEGIES = {"by-offset": "offset", "by-time": "timestamp", "by-header": "header"}
NOW = 1_800_000_000_000


def config_of(strategy: str) -> CompactionConfig:
    return CompactionConfig.from_mapping({
        "compaction.strategy": strategy, "segment.bytes": "600", "min.cleanable.dirty.ratio": "0",
        "delete.retention.ms": str(10**12), **({"compaction.strategy.header": HEADER} if strategy == "header" else {})})


@dataclass
class StateDirModel:
    """A state dir and, per partition, every record appended to its log, in offset order."""

    uri: str
    partitions: int
    records: dict[PartitionId, list[dict]] = field(default_factory=dict)
    rng: random.Random = field(default_factory=lambda: random.Random(7))

    def save(self, topics: dict[str, str] = STRATEGIES) -> None:
        state = open_state_dir(self.uri)
        mapping = JobMapping("127.0.0.1:1", Subscribe(tuple(topics)), "127.0.0.1:1", "{topic}.compacted")
        plans = {t: TopicPlan(t, f"{t}.compacted", config_of(s), self.partitions) for t, s in topics.items()}
        JobSpec(mapping, self.uri, plans).save(state)

    def append(self, pid: PartitionId, n: int, keys: int = 12, clean: bool = True, added: dict | None = None) -> None:
        """``n`` more records of ``keys`` keys: JSON values (with the ``added`` fields too), some tombstones,
        some keyless, versions that go up and down, timestamps out of order; then a roll and, with
        ``clean``, a cleaning pass."""
        state = open_state_dir(self.uri)
        cfg = config_of(STRATEGIES[pid.topic])
        log = open_partition_log(state, LogDir.of(state, pid), cfg.log_config)
        have = self.records.setdefault(pid, [])
        offset = have[-1]["offset"] + 1 if have else 0
        batch = []
        for _ in range(n):
            offset += self.rng.choice([0, 0, 0, 1])
            key = None if self.rng.random() < 0.05 else b"k%d" % self.rng.randrange(keys)
            value = None if self.rng.random() < 0.15 else json.dumps(
                {"n": offset, "name": f"v{offset}", "ok": offset % 2 == 0, **(added or {})}).encode()
            version = self.rng.randrange(-3, 40).to_bytes(8, "big", signed=True)
            batch.append(make_record(offset, key, value, NOW + self.rng.randrange(-5_000, 5_000),
                                     [(HEADER, version)] if self.rng.random() < 0.9 else []))
            offset += 1
        log.append(batch, now_ms=NOW)
        log.roll()
        if clean:
            assert LogCleanerManager(cfg).clean_partition(pid, log, NOW).error is None
        have.extend(batch)


def state_dir(uri: str, partitions: int = 2, records: int = 60) -> StateDirModel:
    model = StateDirModel(uri, partitions)
    model.save()
    for topic in STRATEGIES:
        for p in range(partitions):
            model.append(PartitionId(topic, p), records // 2, clean=True)
            model.append(PartitionId(topic, p), records // 2, clean=False)
    return model


def expected(model: StateDirModel, end: dict[PartitionId, int] | None = None, tombstones: bool = False,
             topics: set[str] | None = None) -> set[tuple]:
    """The reference model's table: one row per live key (topic, partition, offset, timestamp ms, key, value,
    headers), each partition as of ``end`` (default: everything appended)."""
    from tests.cleaner.reference_model import live

    rows = set()
    for pid, records in model.records.items():
        if topics is not None and pid.topic not in topics:
            continue
        strategy = STRATEGIES[pid.topic]
        stop = (end or {}).get(pid, 1 << 62)
        for r in live(records, stop, strategy, HEADER if strategy == "header" else None, tombstones):
            rows.add((pid.topic, pid.partition, r["offset"], r["timestamp"], r["key"], r["value"],
                      tuple((h["key"], h["value"]) for h in r["headers"])))
    return rows


def table_rows(rows: list[dict]) -> set[tuple]:
    """Rows of the table (TABLE_SCHEMA, as pyarrow's to_pylist or Spark's asDict give them) in the model's form."""
    out = set()
    for r in rows:
        ts = r["timestamp"]
        millis = ts if isinstance(ts, int) else round(ts.timestamp() * 1000)
        headers = tuple((h["key"], bytes(h["value"]) if h["value"] is not None else None) for h in r["headers"] or [])
        value = r["value"] if r["value"] is None or isinstance(r["value"], bytes) else bytes(r["value"])
        out.add((r["topic"], r["partition"], r["offset"], millis, bytes(r["key"]), value, headers))
    return out


def append_values(model: StateDirModel, pid: PartitionId, records: list[tuple[bytes, bytes | None]],
                  start_ms: int = NOW) -> None:
    """These (key, value) records after the partition's others, a millisecond apart and after every record
    the model has, then a roll: a topic of values the test writes (a change stream's), compacted by offset."""
    state = open_state_dir(model.uri)
    log = open_partition_log(state, LogDir.of(state, pid), config_of("offset").log_config)
    have = model.records.setdefault(pid, [])
    offset = have[-1]["offset"] + 1 if have else 0
    written = sum(len(r) for r in model.records.values())
    batch = [make_record(offset + i, key, value, start_ms + written + i, []) for i, (key, value) in enumerate(records)]
    log.append(batch, now_ms=NOW)
    log.roll()
    have.extend(batch)
