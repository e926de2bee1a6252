"""Producing to and reading from the test broker, shared by the integration tests."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

from streaming.kafka.headers.origin_header import Origins
from streaming.log import LogConfig, PartitionLog
from streaming.state.layout import log_dir
from streaming.state.stores import open_state_dir
from tests.e2e.helpers import wait_for


# The clusters' ids a test's emitter names: records name their origin, none left out (the sink is another id)
ORIGINS = Origins("test-source-cluster", "test-sink-cluster")

# The SASL/PLAIN login the session's local broker accepts on its SASL listener (tests/e2e/test_security.py).
SASL_USER, SASL_PASSWORD = "compactor", "S3cret-Pa55-9z"


@dataclass
class Sent:
    partition: int
    key: bytes | None
    value: bytes | None
    timestamp: int
    headers: list[tuple[str, bytes | None]] = field(default_factory=list)
    offset: int = -1

    def as_log(self) -> tuple:
        return (self.offset, self.key, self.value, self.timestamp,
                [{"key": k, "value": v} for k, v in self.headers])


def wait_until_led(bootstrap: str, topics: list[str], timeout_s: float = 30) -> None:
    """Until the broker's metadata shows each topic without error and each partition with a leader: a topic is
    created before its partitions are led, and a pattern's source skips a topic in error, so a job started in
    between finds the topic later, as one added while it runs (a batch for it, with nothing in it)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})

    def led() -> bool:
        md = admin.list_topics(timeout=5).topics
        return all(t in md and md[t].error is None and md[t].partitions and
                   all(p.leader >= 0 for p in md[t].partitions.values()) for t in topics)

    wait_for(led, timeout_s, f"topics {topics} led", pause_s=0.1)


def produce(bootstrap: str, topic: str, records: list[Sent], timeout_s: float = 30) -> list[Sent]:
    """Produce in order and fill in each record's offset from its delivery report."""
    return produce_to_topics(bootstrap, {topic: records}, timeout_s)[topic]


def produce_to_topics(bootstrap: str, by_topic: dict[str, list[Sent]], timeout_s: float = 30) -> dict[str, list[Sent]]:
    """produce() for many topics with one producer."""
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    errors: list[str] = []

    def report(rec: Sent):
        def cb(err, msg):
            if err is not None:
                errors.append(str(err))
            else:
                rec.offset = msg.offset()
        return cb

    for topic, records in by_topic.items():
        for r in records:
            producer.produce(topic, key=r.key, value=r.value, partition=r.partition, timestamp=r.timestamp,
                             headers=r.headers or None, on_delivery=report(r))
            producer.poll(0)
    assert producer.flush(timeout_s) == 0 and not errors, errors
    return by_topic


def log_contents(state_dir: str, topic: str, partition: int, from_offset: int = 0) -> list[tuple]:
    plog = PartitionLog(log_dir(open_state_dir(state_dir), topic, partition), LogConfig(fsync=False))
    return [(r["offset"], r["key"], r["value"], r["timestamp"], r["headers"]) for r in plog.read(from_offset)]


ONCE_PREFIX = b"once-"  # keys written exactly once: each one's only record must reach the sink


class ChangeProducer(threading.Thread):
    """Keeps producing while a fault test kills and restarts things: batches of updates over a few keys (whose
    winners the last batches decide), every ``tombstone_every``-th of them a tombstone, and, in every batch,
    one record of a key written exactly once, so a record lost at any moment of the run is missed at the
    end. Its failures are raised by stop()."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, keys: int, batch: int = 25,
                 pause_s: float = 0.3, timeout_s: float = 30.0, tombstone_every: int = 0) -> None:
        super().__init__(daemon=True)
        self.bootstrap, self.topic, self.partitions, self.keys = bootstrap, topic, partitions, keys
        self.batch, self.pause_s, self.timeout_s, self.tombstone_every = batch, pause_s, timeout_s, tombstone_every
        self.sent: list[Sent] = []
        self._halt = threading.Event()
        self._failure: BaseException | None = None

    def run(self) -> None:
        i = 0
        try:
            while not self._halt.is_set():
                now = int(time.time() * 1000)
                batch = [Sent((i + j) % self.partitions, b"key-%d" % ((i + j) % self.keys),
                              None if self.tombstone_every and (i + j) % self.tombstone_every == 0 else
                              b"value-%d" % (i + j), now, [("seq", b"%d" % (i + j))]) for j in range(self.batch)]
                batch.append(Sent(i % self.partitions, ONCE_PREFIX + b"%d" % i, b"once-%d" % i, now))
                self.sent.extend(produce(self.bootstrap, self.topic, batch, self.timeout_s))
                i += self.batch
                self._halt.wait(self.pause_s)
        except BaseException as exc:  # noqa: BLE001 (raised by stop(), on the test's thread)
            self._failure = exc

    def check(self) -> None:
        """Raise the producer's failure now, if it has one."""
        if self._failure is not None:
            raise AssertionError(f"the producer failed: {self._failure!r}") from self._failure

    def stop(self) -> list[Sent]:
        """Stop producing; everything sent, or the producer's failure raised."""
        self._halt.set()
        self.join()
        self.check()
        return self.sent

    def __enter__(self) -> "ChangeProducer":
        self.start()
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self._halt.set()
        self.join()
        if exc is None:
            self.check()
