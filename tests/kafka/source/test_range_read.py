"""The shared range reader: every partition's range read in step, each in offset order, and a read that stops
moving named soon, however long the range."""

from __future__ import annotations

import time

import pytest

from streaming.kafka.source.range_read import range_reader, read_ranges
from streaming.partition_id import PartitionId
from tests.kafka_helpers import Sent, produce

pytestmark = pytest.mark.integration


def test_each_partitions_range_comes_in_offset_order_and_ends_at_its_end(bootstrap_servers: str, new_topic) -> None:
    topic = new_topic(partitions=2)
    produce(bootstrap_servers, topic, [Sent(i % 2, b"k%d" % i, b"v%d" % i, 1_700_000_000_000 + i) for i in range(40)])
    seen: dict[PartitionId, list[int]] = {}

    def each(pid: PartitionId, m) -> bool:
        seen.setdefault(pid, []).append(m.offset())
        return False
    reader = range_reader({"bootstrap.servers": bootstrap_servers}, "test")
    try:
        read_ranges(reader, {PartitionId(topic, 0): (3, 15), PartitionId(topic, 1): (0, 20)}, 10.0, "the test", each)
    finally:
        reader.close()
    assert seen == {PartitionId(topic, 0): list(range(3, 15)), PartitionId(topic, 1): list(range(20))}


def test_a_range_whose_records_never_come_fails_after_the_stall_not_later(bootstrap_servers: str, new_topic) -> None:
    """A range that ends past the partition's end: nothing comes, as from a cluster behind a blackhole."""
    topic = new_topic(partitions=1)
    produce(bootstrap_servers, topic, [Sent(0, b"k", b"v", 1_700_000_000_000)])
    reader = range_reader({"bootstrap.servers": bootstrap_servers}, "test")
    began = time.monotonic()
    try:
        with pytest.raises(TimeoutError, match=rf"the test: nothing came for 2s from {topic}-0"):
            read_ranges(reader, {PartitionId(topic, 0): (0, 5)}, 2.0, "the test", lambda _p, _m: False)
    finally:
        reader.close()
    assert time.monotonic() - began < 10
