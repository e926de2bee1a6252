"""The README's first command: a small change stream compacted for real on a local broker.

It shows what the product is for: updates collapse to the latest, a late lower version does not win
(KIP-280 header strategy), a delete arrives as a tombstone, and every sink record says which source offset
it came from.
"""

from __future__ import annotations

import random
import shutil
import tempfile
import time
from typing import Iterator, TextIO

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from streaming.sink import OFFSET_HEADER
from streaming.topics import create_topic, unique_topic_name

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


def produce_changes(bootstrap_servers: str, topic: str, count: int, interval_s: float, partitions: int,
                    out: TextIO) -> int:
    """Create the topic if needed and produce ``count`` changes (0 = until interrupted)."""
    admin = AdminClient({"bootstrap.servers": bootstrap_servers})
    if topic not in admin.list_topics(timeout=30).topics:
        create_topic(bootstrap_servers, topic, partitions)
    producer = Producer({"bootstrap.servers": bootstrap_servers, "enable.idempotence": True})
    sent = 0
    try:
        for key, value, version in change_stream():
            if count and sent >= count:
                break
            producer.produce(topic, key=key, value=value,
                             headers=[(VERSION_HEADER, version.to_bytes(8, "big", signed=True))])
            producer.poll(0)
            sent += 1
            if sent % 100 == 0:
                print(f"produced {sent} changes to {topic}", file=out, flush=True)
            if interval_s:
                time.sleep(interval_s)
    except KeyboardInterrupt:
        pass
    producer.flush(30)
    return 0


def _show(b: bytes | None) -> str:
    return "null (tombstone)" if b is None else b.decode("utf-8", "replace")


def _version(headers) -> str:
    for k, v in reversed(headers or []):
        if k == VERSION_HEADER and v is not None:
            return str(int.from_bytes(v, "big", signed=True))
    return "-"


def _read_all(bootstrap: str, topic: str, partitions: int) -> list:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"{topic}-demo-reader",
                         "enable.auto.commit": False, "isolation.level": "read_committed"})
    out = []
    try:
        for p in range(partitions):
            _, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10, cached=False)
            consumer.assign([TopicPartition(topic, p, 0)])
            while high and consumer.position([TopicPartition(topic, p)])[0].offset < high:
                batch = consumer.consume(100, timeout=5)
                if not batch:
                    break
                out.extend(m for m in batch if m.error() is None)
    finally:
        consumer.close()
    return out


def run_demo(bootstrap_servers: str, out: TextIO, state_dir: str | None = None) -> int:
    from streaming.cli import main  # noqa: PLC0415 (the demo runs the real command)

    source = create_topic(bootstrap_servers, unique_topic_name("demo-changes"), partitions=1,
                          config={"retention.ms": "-1"})
    sink = unique_topic_name("demo-compacted")
    producer = Producer({"bootstrap.servers": bootstrap_servers, "enable.idempotence": True})
    for key, value, version in CHANGES:
        producer.produce(source, key=key, value=value, partition=0,
                         headers=[(VERSION_HEADER, version.to_bytes(8, "big", signed=True))])
    if producer.flush(30) != 0:
        raise RuntimeError(f"demo records not acknowledged by {bootstrap_servers}")
    print(f"produced {len(CHANGES)} changes to {source}:", file=out)
    for i, (key, value, version) in enumerate(CHANGES):
        print(f"  {i:>3}  {key.decode():<7} v{version}  {_show(value)}", file=out)
    time.sleep(1.1)  # let the records pass max.compaction.lag.ms=1000 below, so --once cleans them now

    work = state_dir or tempfile.mkdtemp(prefix="kcompact-demo-")
    try:
        code = main(["--log-level", "WARNING", "run", "--bootstrap-servers", bootstrap_servers,
                     "--source-topic", source, "--sink-topic", sink, "--state-dir", work, "--once",
                     "--config", "compaction.strategy=header", "--config", f"compaction.strategy.header={VERSION_HEADER}",
                     "--config", "max.compaction.lag.ms=1000", "--config", "min.cleanable.dirty.ratio=0.5"])
        if code != 0:
            return code
        print(f"\nsink topic {sink} (compacted, version-ordered):", file=out)
        print(f"  {'offset':>6}  {'key':<7} {'ver':>3}  {'source offset':>13}  value", file=out)
        for m in _read_all(bootstrap_servers, sink, 1):
            src = next((v.decode() for k, v in reversed(m.headers() or []) if k == OFFSET_HEADER), "?")
            print(f"  {m.offset():>6}  {m.key().decode():<7} {_version(m.headers()):>3}  {src:>13}  {_show(m.value())}",
                  file=out)
        print("\nkcompact status:", file=out)
        out.flush()
        return main(["--log-level", "WARNING", "status", "--state-dir", work])
    finally:
        if state_dir is None:
            shutil.rmtree(work, ignore_errors=True)
