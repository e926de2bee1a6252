"""ListOffsets answers while a partition's leader is moving or not yet elected: waited out, not reported."""

from __future__ import annotations

import concurrent.futures

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition

from streaming.kafka.admin import answered
from streaming.kafka.failures import is_transient


def _failed(err: KafkaError) -> concurrent.futures.Future:
    future: concurrent.futures.Future = concurrent.futures.Future()
    future.set_exception(KafkaException(err))
    return future


def test_a_partition_with_no_leader_yet_is_waited_out() -> None:
    """What librdkafka's ListOffsets said while the only broker of tests/e2e/test_faults.py restarted; the
    job died of it (the source's latestOffset) before this was read as a leader not yet elected."""
    future = _failed(KafkaError(KafkaError._NOENT, "Failed to query partition leaders: No leaders found"))
    with pytest.raises(KafkaException) as raised:
        answered(TopicPartition("src", 3), future, 1)
    assert is_transient(raised.value) and "no leader for src-3 yet (Failed to query" in str(raised.value)


def test_other_failures_of_a_listoffsets_answer_pass_unchanged() -> None:
    err = KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED)
    with pytest.raises(KafkaException) as raised:
        answered(TopicPartition("src", 0), _failed(err), 1)
    assert raised.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
