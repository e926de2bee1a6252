"""`kcompact run --snapshot-every` keeps an Iceberg table in step with the compacted state: after two runs
over a real topic with updates and tombstones, the table holds each live key's winner (the timestamp
strategy's) and nothing of a deleted key."""

from __future__ import annotations

import json
import random

import pytest
from pyiceberg.catalog import load_catalog

from streaming.iceberg.snapshot import CATALOG_NAME
from streaming.iceberg.target import IcebergTarget
from tests.e2e.helpers import run_once, winners
from tests.kafka_helpers import Sent, produce

pytestmark = pytest.mark.integration
PARTITIONS = 2


def _changes(rng: random.Random, n: int, keys: int, at: int) -> list[Sent]:
    out = []
    for i in range(n):
        value = None if rng.random() < 0.2 else json.dumps({"i": i, "at": at}).encode()
        out.append(Sent(i % PARTITIONS, b"k%d" % rng.randrange(keys), value, at + rng.randrange(-500, 500)))
    return out


def test_run_with_snapshot_every_keeps_the_iceberg_table_at_the_winners(bootstrap_servers, new_topic, tmp_path) -> None:
    src = new_topic(partitions=PARTITIONS)
    rng = random.Random(3)
    target = IcebergTarget("state.orders", f"sqlite:///{tmp_path}/catalog.db")
    extra = ("--snapshot-every", "0", "--iceberg-table", target.table, "--iceberg-catalog", target.catalog,
             "--snapshot-value-format", "json")
    sent: list[Sent] = []
    for wave in range(2):
        sent += produce(bootstrap_servers, src, _changes(rng, 400, 60, 1_700_000_000_000 + wave * 10_000))
        assert run_once(bootstrap_servers, src, f"{src}.c", str(tmp_path / "state"),
                        "compaction.strategy=timestamp", extra=extra) == 0
        table = load_catalog(CATALOG_NAME, **target.settings()).load_table(target.table)
        got = {(r["partition"], r["offset"], r["key"], json.dumps(r["value"], sort_keys=True))
               for r in table.scan().to_arrow().to_pylist()}
        want = {(s.partition, s.offset, s.key, json.dumps(json.loads(s.value), sort_keys=True))
                for p in range(PARTITIONS)
                for s in winners([s for s in sent if s.partition == p], "timestamp") if s.value is not None}
        assert got == want, wave
