"""A record's size as the emitter counts it is the broker's and librdkafka's: a record that exactly fills a topic's
max.message.bytes is taken, one a byte bigger is refused; librdkafka refuses one a byte over message.max.bytes."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer

from streaming.kafka.sink.record_size import RecordLimits, batch_size, librdkafka_size, varint_size

LIMIT = 3000
HEADERS = [("trace", b"x" * 40), ("empty", None), ("тип", b""), ("kcompact.offset", b"12345")]


def _value_for(size: int, key: bytes | None, headers: list) -> bytes:
    """A value that makes the record's one-record batch exactly ``size`` bytes."""
    value = b"v" * (size - batch_size(key, b"", headers))
    while batch_size(key, value, headers) > size:  # a longer value may take a longer length varint
        value = value[:-1]
    assert batch_size(key, value, headers) == size
    return value


@pytest.mark.integration
@pytest.mark.parametrize("key", [b"k" * 200, None], ids=["keyed", "keyless"])
def test_a_record_that_fills_the_topics_limit_is_taken_and_one_byte_more_is_refused(bootstrap_servers, new_topic,
                                                                                  key) -> None:
    topic = new_topic(partitions=1, config={"max.message.bytes": str(LIMIT)})
    producer = Producer({"bootstrap.servers": bootstrap_servers, "message.max.bytes": 10 * LIMIT, "linger.ms": 0,
                         "batch.num.messages": 1})
    outcomes: list[KafkaError | None] = []
    for size in (LIMIT, LIMIT + 1):
        producer.produce(topic, _value_for(size, key, HEADERS), key, 0, headers=HEADERS,
                         on_delivery=lambda err, _msg: outcomes.append(err))
        producer.flush(30)
    assert outcomes[0] is None, outcomes
    assert outcomes[1] is not None and outcomes[1].code() == KafkaError.MSG_SIZE_TOO_LARGE, outcomes


def test_librdkafka_refuses_a_record_one_byte_over_message_max_bytes() -> None:
    producer = Producer({"bootstrap.servers": "127.0.0.1:9", "message.max.bytes": LIMIT, "log_level": 0})
    fits = b"v" * (LIMIT - librdkafka_size(b"key", b"", HEADERS))
    assert librdkafka_size(b"key", fits, HEADERS) == LIMIT
    producer.produce("t", fits, b"key", headers=HEADERS)
    with pytest.raises(KafkaException, match="MSG_SIZE_TOO_LARGE"):
        producer.produce("t", fits + b"v", b"key", headers=HEADERS)
    producer.purge()


def test_a_producer_takes_the_largest_record_of_its_topics_in_batches_within_the_smallest() -> None:
    assert RecordLimits({"a": 5_242_880, "b": 1_048_588}).producer_settings() == \
        {"message.max.bytes": 5_242_880, "batch.size": 1_000_000}
    assert RecordLimits({"a": 1_048_588}, "dlt", 2_000).producer_settings() == \
        {"message.max.bytes": 1_048_588, "batch.size": 2_000 - 61 - 64}
    assert RecordLimits().producer_settings() == {}, "none known: librdkafka's own"


def test_varints_are_kafkas_zigzag_ones() -> None:
    assert [varint_size(n) for n in (0, -1, 63, 64, -64, -65, 8191, 8192, 2**31 - 1)] == [1, 1, 1, 2, 1, 2, 2, 3, 5]
