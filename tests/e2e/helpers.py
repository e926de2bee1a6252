"""Running the compactor through its CLI and reading the sink, for the end-to-end tests."""

from __future__ import annotations

import concurrent.futures
import importlib.util
import json
import logging
import os
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient

from streaming.cli.main import main
from streaming.job.metrics import read_doc
from streaming.state.stores import open_state_dir
from streaming.kafka.clients import committed_offsets
from streaming.kafka.headers.offset_header import OFFSET_HEADER, source_offset
from streaming.kafka.headers.origin_header import ORIGIN_HEADER
from streaming.kafka.failures import TRY_S, is_transient, retrying
from tests.cleaner.reference_model import rank

# A sink as production has it, compacted by the broker, with settings under which Kafka's cleaner (its back-off is
# 1 s on the test brokers, streaming.brokers.properties) cleans it within seconds of a segment rolling: every
# e2e job writes to one unless its test says why it needs the sink whole.
COMPACTED_SINK = ["--sink-topic-config", "cleanup.policy=compact", "--sink-topic-config", "segment.ms=500",
                  "--sink-topic-config", "min.cleanable.dirty.ratio=0.01"]
# A sink the broker leaves whole: for a test that reads every record the job ever emitted, superseded ones too.
NO_SINK_COMPACTION = ["--sink-topic-config", "cleanup.policy=delete", "--sink-topic-config", "retention.ms=-1"]


def run_once(bootstrap: str, source: str, sink: str, state_dir: str, *config: str, extra: tuple = (),
             sink_config: list[str] = COMPACTED_SINK) -> int:
    """`kcompact run --once` in this process (it shares the test session's SparkSession); ``sink_config``:
    NO_SINK_COMPACTION for a test that reads every record the job emitted."""
    args = ["run", "--bootstrap-servers", bootstrap, "--source-topic", source, "--sink-topic", sink,
            "--state-dir", state_dir, "--once", *sink_config, *extra]
    for c in config:
        args += ["--config", c]
    return main(args)


class IncompleteRead(AssertionError):
    """A read that did not reach the end offsets it set out for: a truncated read must never pass for a
    topic that holds fewer records."""


def read_topic(bootstrap: str, topic: str, partitions: int, timeout_s: float = 30) -> dict[int, list[dict]]:
    """Every committed record of every partition up to its end when the read starts, as dicts with its offset
    and the sink contract's fields. Raises IncompleteRead when a partition's end is not reached in time."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"read-{topic}-{time.time_ns()}",
                         "enable.auto.commit": False, "isolation.level": "read_committed"})
    out: dict[int, list[dict]] = {}
    try:
        if topic not in consumer.list_topics(timeout=timeout_s).topics:
            return out  # not created yet (the job creates the sink when it starts)
        # asked again while the answer is transient: a topic the job just made has partitions without a leader
        marks = {p: retrying(lambda p=p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=TRY_S,
                                                                        cached=False),
                             f"watermarks of {topic}-{p}", timeout_s, side="topic's", client=consumer, topic=topic,
                             pause_s=0.2, level=logging.DEBUG)
                 for p in range(partitions)}
        ends = {p: high for p, (low, high) in marks.items() if high > low}  # from the log start: records deleted
        out = {p: [] for p in range(partitions)}
        consumer.assign([TopicPartition(topic, p, marks[p][0]) for p in ends])  # together: one fetch serves them all
        deadline = time.monotonic() + timeout_s
        while pending := [tp for tp in consumer.position([TopicPartition(topic, p) for p in ends])
                          if tp.offset < ends[tp.partition]]:
            if time.monotonic() > deadline:
                raise IncompleteRead(f"{topic}-{pending[0].partition}: the read stopped at offset {pending[0].offset}, "
                                     f"before the end {ends[pending[0].partition]} it set out for, within "
                                     f"{timeout_s:.0f}s")
            for m in consumer.consume(500, timeout=1):
                assert m.error() is None, m.error()
                out[m.partition()].append({"offset": m.offset(), "key": m.key(), "value": m.value(),
                                           "timestamp": m.timestamp()[1], "headers": m.headers() or [],
                                           "source_offset": source_offset(m.headers())})
        out = {p: [r for r in records if r["offset"] < ends.get(p, 0)] for p, records in out.items()}
    finally:
        consumer.close()
    return out


def wait_for(condition, timeout_s: float, what: str, pause_s: float = 0.5):
    """Poll ``condition`` until it returns something true, and return that; fail naming ``what`` otherwise."""
    deadline = time.monotonic() + timeout_s
    while True:
        found = condition()
        if found:
            return found
        assert time.monotonic() < deadline, f"{what}: not within {timeout_s:.0f}s"
        time.sleep(pause_s)


@dataclass(frozen=True)
class JobProgress:
    """How far a running job got, from the metrics document it writes every trigger."""

    logged: int   # records offsets appended, summed over partitions (log end offsets)
    emitted: int  # last emitted source offsets + 1, summed over partitions

    @classmethod
    def of(cls, state_dir: str) -> "JobProgress":
        doc = read_doc(open_state_dir(state_dir))
        parts = doc.partitions if doc else ()
        return cls(sum(p.log_end_offset for p in parts),
                   sum(p.emitted_up_to + 1 for p in parts if p.emitted_up_to is not None))

    def beyond(self, other: "JobProgress") -> bool:
        """Both ingest and emission moved on since ``other``."""
        return self.logged > other.logged and self.emitted > other.emitted


def sink_caught_up(bootstrap: str, sink: str, sent, partitions: int) -> bool:
    """Every key's final winner is the last sink record of its key (read again until it is)."""
    try:
        got = read_topic(bootstrap, sink, partitions, timeout_s=10)
    except IncompleteRead:
        return False
    except KafkaException as exc:  # a leader just elected, its high watermark not caught up yet: read again
        if not is_transient(exc):
            raise
        return False
    return all({r["key"]: r["source_offset"] for r in got.get(p, [])}
               == {s.key: s.offset for s in winners([s for s in sent if s.partition == p])}
               for p in range(partitions))


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


def assert_sink_headers(got: list, sent) -> None:
    """A sink record's headers: its source record's, then its source offset, then the cluster it came from."""
    assert got[:-1] == sent.headers + [(OFFSET_HEADER, str(sent.offset).encode())], got
    assert got[-1][0] == ORIGIN_HEADER and got[-1][1], got


def assert_sink_contract(bootstrap: str, sink: str, sent, partitions: int) -> None:
    """What must hold whatever the timing of crashes and outages: per partition strictly increasing source
    offsets (nothing twice, order kept), every sink record identical to its source record, every record of a
    key written only once in the sink (a record lost at any moment is missed), and for every key the last
    sink record is the key's final winner."""
    by_offset = {(s.partition, s.offset): s for s in sent}
    got = read_topic(bootstrap, sink, partitions)
    for p in range(partitions):
        records = got.get(p, [])
        offsets = [r["source_offset"] for r in records]
        assert offsets == sorted(set(offsets)), f"partition {p}: emitted twice or out of order: " \
                                                f"{offsets_diff(offsets, sorted(set(offsets)))}"
        for r in records:
            s = by_offset[(p, r["source_offset"])]
            assert (r["key"], r["value"], r["timestamp"]) == (s.key, s.value, s.timestamp)
            assert_sink_headers(r["headers"], s)
        mine = [s for s in sent if s.partition == p]
        written = Counter(s.key for s in mine)
        once = sorted(s.offset for s in mine if written[s.key] == 1)
        arrived = set(offsets)
        lost = [o for o in once if o not in arrived]
        assert not lost, f"partition {p}: {len(lost)} of {len(once)} records of keys written once never reached " \
                         f"the sink: {offsets_diff([o for o in once if o in arrived], once)}"
        last_per_key = {}
        for r in records:
            last_per_key[r["key"]] = r["source_offset"]
        final_winners = {s.key: s.offset for s in winners(mine)}
        assert last_per_key == final_winners, f"partition {p}: the sink lost a key's latest value"


def commit_group_offsets(bootstrap: str, group: str, topic: str, partitions: int, offset: int) -> None:
    """A consumer group of ``topic`` with committed offsets, for the group sync to carry to the sink. On a
    new cluster the first commit can answer while the offsets topic's coordinator still loads, with the
    error per partition: committed again until the offsets read back."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    request = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p, offset) for p in range(partitions)])

    def committed() -> bool:
        try:
            admin.alter_consumer_group_offsets([request])[group].result(30)
            return len(group_offsets(bootstrap, group, topic, partitions)) == partitions
        except (KafkaException, concurrent.futures.TimeoutError):  # the coordinator still loading
            return False
    wait_for(committed, 120, f"group {group}'s offsets committed on {topic}")


def group_offsets(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    """Read as the job reads them (committed_offsets): the admin API's read can kill the process while a
    coordinator moves."""
    found = committed_offsets({"bootstrap.servers": bootstrap}, group,
                              [TopicPartition(topic, p) for p in range(partitions)], 30)
    return {tp.partition: tp.offset for tp in found if tp.offset >= 0}


def load_bench(name: str):
    """A script of bench/ as a module, for a test that runs a short version of it."""
    spec = importlib.util.spec_from_file_location(name, Path(__file__).resolve().parents[2] / "bench" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # its dataclasses look their module up while they are made
    spec.loader.exec_module(module)
    return module


def first_transactional_id(state_dir: str) -> str:
    """The transactional id the first task of the job of ``state_dir`` writes with (slot 0's)."""
    from streaming.job.spec import load_saved
    from streaming.kafka.sink.transactional_ids import transactional_id
    from streaming.state.stores import open_state_dir

    return transactional_id(load_saved(open_state_dir(state_dir)).job_id, 0)


def children(pid: int) -> list[int]:
    """The processes whose parent is ``pid``."""
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                        out.append(int(entry))
            except (OSError, IndexError, ValueError):
                continue
    return out


def descendants(pid: int) -> list[int]:
    """Every process under ``pid``."""
    found, todo = [], [pid]
    while todo:
        kids = children(todo.pop())
        found += kids
        todo += kids
    return found
