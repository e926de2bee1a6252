"""ListOffsets answers: a partition's leader moving or not yet elected is waited out, not reported; requests made
at once are read only when all are answered."""

from __future__ import annotations

import concurrent.futures
import threading

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition

from streaming.kafka.answers import answered, answers
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
        answered(TopicPartition("src", 3), future)
    assert is_transient(raised.value) and "no leader for src-3 yet (Failed to query" in str(raised.value)


def test_other_failures_of_a_listoffsets_answer_pass_unchanged() -> None:
    err = KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED)
    with pytest.raises(KafkaException) as raised:
        answered(TopicPartition("src", 0), _failed(err))
    assert raised.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_a_failed_answer_is_raised_only_once_the_other_requests_are_answered() -> None:
    """The first request's answer fails at once; the second's comes later. Raising at once would let the caller
    make a new client for its retry while the second request is still out."""
    late: concurrent.futures.Future = concurrent.futures.Future()
    answer = type("Answer", (), {"offset": 7})()
    timer = threading.Timer(0.3, late.set_result, (answer,))
    timer.start()
    first, second = TopicPartition("src", 0), TopicPartition("src", 1)
    with pytest.raises(KafkaException):
        answers([{first: _failed(KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART))}, {second: late}], 5)
    assert late.done(), "a request was still out when the failure was raised"


def test_an_answer_still_out_after_the_wait_is_a_timeout_the_retry_waits_out() -> None:
    never: concurrent.futures.Future = concurrent.futures.Future()
    with pytest.raises(concurrent.futures.TimeoutError):
        answers([{TopicPartition("src", 0): never}], 0.01)
