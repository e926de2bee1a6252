"""Producing to and reading from the test broker, shared by the integration tests."""

from __future__ import annotations

from dataclasses import dataclass, field

from confluent_kafka import Producer

from streaming.log import LogConfig, PartitionLog
from streaming.state.layout import log_dir
from streaming.state.stores import open_state_dir


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


def produce(bootstrap: str, topic: str, records: list[Sent], timeout_s: float = 30) -> list[Sent]:
    """Produce in order and fill in each record's offset from its delivery report."""
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    errors: list[str] = []

    def report(rec: Sent):
        def cb(err, msg):
            if err is not None:
                errors.append(str(err))
            else:
                rec.offset = msg.offset()
        return cb

    for r in records:
        producer.produce(topic, key=r.key, value=r.value, partition=r.partition, timestamp=r.timestamp,
                         headers=r.headers or None, on_delivery=report(r))
        producer.poll(0)
    assert producer.flush(timeout_s) == 0 and not errors, errors
    return records


def log_contents(state_dir: str, topic: str, partition: int, from_offset: int = 0) -> list[tuple]:
    plog = PartitionLog(log_dir(open_state_dir(state_dir), topic, partition), LogConfig(fsync=False))
    return [(r["offset"], r["key"], r["value"], r["timestamp"], r["headers"]) for r in plog.read(from_offset)]
