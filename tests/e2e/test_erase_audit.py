"""The erase audit on real runs: `kcompact erasures` agrees with the passes that ran (the cleaner's own
record of them) and with the sink's offsets, on a local state dir and on S3; a key written again ends its
entry; and `--overdue` finds the tombstones a failing sink holds back, with exit status 1."""

from __future__ import annotations

import hashlib
import json
import time

from unittest.mock import ANY

import pytest

from streaming.cli.main import main
from streaming.job.metrics import read_doc
from streaming.kafka.admin import create_topic, unique_topic_name
from streaming.state.stores import open_state_dir
from tests.e2e.helpers import read_topic, run_once, status_json
from tests.kafka_helpers import Sent, produce

pytestmark = pytest.mark.integration

HOUR = 3_600_000
FORCE = "max.compaction.lag.ms=60000"


def erasures(state: str, capsys, *extra: str) -> tuple[int, dict]:
    capsys.readouterr()
    rc = main(["erasures", "--state-dir", state, "--json", *extra])
    return rc, json.loads(capsys.readouterr().out)


def _passes(state: str, capsys) -> dict[int, tuple[int, int]]:
    return {p["partition"]: (p["passes"], p["last_clean_ms"]) for p in status_json(state, capsys)["partitions"]}


@pytest.mark.parametrize("store", ["local", pytest.param("s3", marks=pytest.mark.minio)])
def test_the_audit_of_a_real_run_agrees_with_the_passes_and_the_sink(store, request, spark, bootstrap_servers,
                                                                     new_topic, tmp_path, capsys) -> None:
    src, sink = new_topic(partitions=2), unique_topic_name("sink")
    if store == "s3":
        s3 = request.getfixturevalue("s3_server")
        state, extra = s3.uri(s3.new_bucket(), "audit"), ("--checkpoint-location", str(tmp_path / "checkpoint"))
    else:
        state, extra = str(tmp_path / "state"), ()
    past = int(time.time() * 1000) - 2 * HOUR
    values = produce(bootstrap_servers, src, [Sent(i % 2, b"k%d" % i, b"v%d" % i, past + i) for i in range(20)])
    deletes = produce(bootstrap_servers, src, [Sent(i % 2, b"k%d" % i, None, past + 100 + i) for i in range(0, 20, 3)])
    assert run_once(bootstrap_servers, src, sink, state, FORCE, extra=extra) == 0

    rc, found = erasures(state, capsys)
    assert rc == 0 and found["overdue"] == 0
    entries = {(e["partition"], e["offset"]): e for e in found["entries"]}
    assert set(entries) == {(d.partition, d.offset) for d in deletes}
    passes = _passes(state, capsys)
    in_sink = {(p, r["source_offset"]): r["offset"] for p, records in read_topic(bootstrap_servers, sink, 2).items()
               for r in records if r["value"] is None}
    for d in deletes:
        e = entries[(d.partition, d.offset)]
        assert e["key_sha256"] == hashlib.sha256(d.key).hexdigest() and e["key"] is None
        assert e["timestamp_ms"] == d.timestamp and e["ingested_ms"] <= e["erased_ms"]
        count, last_clean_ms = passes[d.partition]
        assert count == 1 and e["erased_ms"] == last_clean_ms, "erased by the one pass the cleaner records"
        assert e["sink_offset"] == in_sink[(d.partition, d.offset)] and e["sink_ms"] >= e["erased_ms"]
        assert e["state"] == "in the sink" and not e["sink_recovered"]
    earlier = {v.key for v in values}
    assert {e["key_sha256"] for e in entries.values()} <= {hashlib.sha256(k).hexdigest() for k in earlier}
    assert any(f"source topic {src}" in line and "retention" in line for line in found["outside"]), found["outside"]
    assert any(f"sink topic {sink}" in line for line in found["outside"]), found["outside"]
    # nothing listed, nothing to bound: the notes are of the topics whose erasures are listed
    assert erasures(state, capsys, "--overdue") == (0, {**found, "entries": [], "outside": [], "at_ms": ANY})
    for wrong, said in ((("--since", "yesterday"), "--since 'yesterday': not a time"),
                        (("--topic", "nope"), "topic 'nope' is not mirrored")):
        assert main(["erasures", "--state-dir", state, *wrong]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and said in err[0], err

    again = deletes[0]
    [rewrite] = produce(bootstrap_servers, src, [Sent(again.partition, again.key, b"back", past + 1000)])
    assert run_once(bootstrap_servers, src, sink, state, FORCE, extra=extra) == 0
    rc, found = erasures(state, capsys, "--key", again.key.decode())
    [e] = found["entries"]
    count, last_clean_ms = _passes(state, capsys)[again.partition]
    assert (e["offset"], e["state"], e["superseded_by"]) == (again.offset, "key written again", rewrite.offset)
    assert count == 2 and e["superseded_ms"] == last_clean_ms
    assert e["erased_ms"] == entries[(again.partition, again.offset)]["erased_ms"], "history is kept"


def test_overdue_finds_the_tombstones_a_failing_sink_holds_back(spark, bootstrap_servers, new_topic, tmp_path,
                                                              capsys) -> None:
    """The sink takes no record over 200 bytes: every transaction with a 1 kB value fails, so the cleaned
    tombstones never reach it. They were stamped two hours ago, far past max.compaction.lag.ms."""
    src = new_topic(partitions=1)
    sink = create_topic(bootstrap_servers, unique_topic_name("sink"), 1,
                        {"cleanup.policy": "compact", "max.message.bytes": "200"})
    state = str(tmp_path / "state")
    past = int(time.time() * 1000) - 2 * HOUR
    produce(bootstrap_servers, src, [Sent(0, b"k%d" % i, b"x" * 1000, past + i) for i in range(10)])
    deletes = produce(bootstrap_servers, src, [Sent(0, b"k%d" % i, None, past + 100 + i) for i in range(3)])
    rc = main(["run", "--bootstrap-servers", bootstrap_servers, "--source-topic", src, "--sink-topic", sink,
               "--state-dir", state, "--once", "--retry-timeout", "2", "--config", FORCE])
    assert rc != 0, "the job says the sink failed"
    capsys.readouterr()
    rc = main(["erasures", "--state-dir", state, "--overdue"])
    out = capsys.readouterr().out
    assert rc == 1, out
    rc, found = erasures(state, capsys, "--overdue")
    assert rc == 1 and found["overdue"] == len(deletes) == len(found["entries"])
    assert {(e["offset"], e["overdue"]) for e in found["entries"]} == {(d.offset, "not in the sink yet") for d in deletes}
    assert all(e["erased_ms"] is not None for e in found["entries"]), "cleaned: only the sink holds them back"
    assert [p.erasures_overdue for p in read_doc(open_state_dir(state)).partitions] == [len(deletes)]
    for line in [line for line in out.splitlines() if "OVERDUE" in line]:
        assert f"{src}-0" in line and "not in the sink yet" in line
