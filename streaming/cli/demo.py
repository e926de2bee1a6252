"""The demo, README's first command: a small change stream compacted for real on a local broker.

It shows what the product is for: updates collapse to the latest, a late lower version does not win
(KIP-280 header strategy), a delete arrives as a tombstone, and every sink record says which source offset
it came from.
"""

from __future__ import annotations

import random
import shutil
import tempfile
import time
from dataclasses import dataclass
from typing import Callable, Iterator, TextIO

from streaming.errors import JobError, UsageError

from streaming.kafka.admin import Cluster, create_topic, unique_topic_name
from streaming.kafka.clients import RecordProducer, TopicRecord, read_committed
from streaming.kafka.headers.offset_header import OFFSET_HEADER

VERSION_HEADER = "version"

# (key, value, version): updates, an out-of-order late version and a delete
CHANGES: list[tuple[bytes, bytes | None, int]] = [
    (b"user-1", b'{"name": "Ada"}', 1),
    (b"user-2", b'{"name": "Grace"}', 1),
    (b"user-1", b'{"name": "Ada Lovelace"}', 3),
    (b"user-3", b'{"name": "Edsger"}', 1),
    (b"user-1", b'{"name": "Ada L. (late v2)"}', 2),
    (b"user-2", b'{"name": "Grace Hopper"}', 2),
    (b"user-3", None, 2),
    (b"user-4", b'{"name": "Barbara"}', 1),
]


def change_stream(seed: int = 0, keys: int = 20) -> Iterator[tuple[bytes, bytes | None, int]]:
    """An endless keyed change stream: updates with rising versions, some late lower versions (two
    producers out of step) and some deletes."""
    rng = random.Random(seed)
    versions = [0] * keys
    while True:
        k = rng.randrange(keys)
        key = b"user-%d" % k
        roll = rng.random()
        if roll < 0.1:
            versions[k] += 1
            yield key, None, versions[k]
        elif roll < 0.25 and versions[k] > 1:
            late = rng.randrange(1, versions[k])
            yield key, b'{"user": %d, "v": %d, "late": true}' % (k, late), late
        else:
            versions[k] += 1
            yield key, b'{"user": %d, "v": %d}' % (k, versions[k]), versions[k]


@dataclass(frozen=True)
class ChangeTopic:
    """The topic `produce-changes` writes to, and how it is created when missing."""

    name: str
    partitions: int = 3
    replication_factor: int = -1  # the cluster's default
    compact: bool = False  # cleanup.policy=compact, as a changelog topic is
    keys: int = 20

    def __post_init__(self) -> None:
        for what, value, least in (("--partitions", self.partitions, 1), ("--keys", self.keys, 1)):
            if value < least:
                raise UsageError(f"{what} must be at least {least}, got {value}")
        if self.replication_factor == 0 or self.replication_factor < -1:
            raise UsageError(f"--replication-factor must be at least 1, got {self.replication_factor}")


def produce_changes(cluster: Cluster, topic: ChangeTopic, count: int, interval_s: float, out: TextIO) -> int:
    """Create the topic if needed and produce ``count`` changes (0 = until interrupted), as ``cluster``'s
    settings log in (a secured listener's TLS and SASL settings)."""
    bootstrap_servers = cluster.bootstrap_servers
    if topic.name not in cluster.metadata().topics:
        try:
            create_topic(bootstrap_servers, topic.name, topic.partitions,
                         {"cleanup.policy": "compact"} if topic.compact else {},
                         replication_factor=topic.replication_factor, client_config=cluster.settings)
        except RuntimeError as exc:
            raise JobError(str(exc)) from None
    producer = RecordProducer(bootstrap_servers, cluster.settings)
    sent = 0
    try:
        for key, value, version in change_stream(keys=topic.keys):
            if count and sent >= count:
                break
            producer.send(topic.name, _versioned(key, value, version))
            sent += 1
            if sent % 100 == 0:
                print(f"produced {sent} changes to {topic.name}", file=out, flush=True)
            if interval_s:
                time.sleep(interval_s)
    except KeyboardInterrupt:
        pass
    try:
        producer.flush()
    except RuntimeError as exc:
        raise JobError(f"producing to {topic.name}: {exc}") from None
    return 0


def _versioned(key: bytes, value: bytes | None, version: int) -> TopicRecord:
    return TopicRecord(key, value, ((VERSION_HEADER, version.to_bytes(8, "big", signed=True)),))


def _show(b: bytes | None) -> str:
    return "null (tombstone)" if b is None else b.decode("utf-8", "replace")


def _version(headers) -> str:
    for k, v in reversed(headers or []):
        if k == VERSION_HEADER and v is not None:
            return str(int.from_bytes(v, "big", signed=True))
    return "-"


def run_demo(bootstrap_servers: str, out: TextIO, main: Callable[[list[str]], int],
             state_dir: str | None = None) -> int:
    """``main`` is the command line's own entry point: the demo runs the real commands."""
    source = create_topic(bootstrap_servers, unique_topic_name("demo-changes"), partitions=1,
                          config={"retention.ms": "-1"})
    sink = unique_topic_name("demo-compacted")
    producer = RecordProducer(bootstrap_servers)
    for key, value, version in CHANGES:
        producer.send(source, _versioned(key, value, version), partition=0)
    producer.flush()
    del producer  # no client outlives its use: one left open would log reconnects once the broker stops
    print(f"produced {len(CHANGES)} changes to {source}:", file=out)
    for i, (key, value, version) in enumerate(CHANGES):
        print(f"  {i:>3}  {key.decode():<7} v{version}  {_show(value)}", file=out)

    work = state_dir or tempfile.mkdtemp(prefix="kcompact-demo-")
    try:
        code = main(["--log-level", "WARNING", "run", "--bootstrap-servers", bootstrap_servers,
                     "--source-topic", source, "--sink-topic", sink, "--state-dir", work, "--once", "--drain",
                     "--config", "compaction.strategy=header", "--config", f"compaction.strategy.header={VERSION_HEADER}",
                     "--config", "min.cleanable.dirty.ratio=0.5"])
        if code != 0:
            return code
        print(f"\nsink topic {sink} (compacted, version-ordered):", file=out)
        print(f"  {'offset':>6}  {'key':<7} {'ver':>3}  {'source offset':>13}  value", file=out)
        for r in read_committed(bootstrap_servers, sink, 1):
            src = next((v.decode() for k, v in reversed(r.headers) if k == OFFSET_HEADER and v), "?")
            print(f"  {r.offset:>6}  {r.key.decode():<7} {_version(r.headers):>3}  {src:>13}  {_show(r.value)}",
                  file=out)
        print("\nkcompact status:", file=out)
        out.flush()
        return main(["--log-level", "WARNING", "status", "--state-dir", work])
    finally:
        if state_dir is None:
            shutil.rmtree(work, ignore_errors=True)
