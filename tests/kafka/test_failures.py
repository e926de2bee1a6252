"""Which failures the job waits out and which it reports: classified from exceptions and from the text
a task failure reaches the driver as."""

from __future__ import annotations

import concurrent.futures
import re

import pytest
from confluent_kafka import KafkaError, KafkaException

from streaming.errors import JobError
from streaming.kafka.failures import is_refused, is_transient, reason, retrying, said_in_one_line
from streaming.job.failures import Restarts

SPARK_TEXT = ('[FOREACH_BATCH_USER_FUNCTION_ERROR] ... Traceback (most recent call last):\n'
              'cimpl.KafkaException: KafkaError{code=%s,val=-187,str="Failed to get watermark offsets"}')


@pytest.mark.parametrize("code", [KafkaError._ALL_BROKERS_DOWN, KafkaError._TRANSPORT, KafkaError._TIMED_OUT,
                                  KafkaError._TIMED_OUT_QUEUE, KafkaError.NOT_LEADER_FOR_PARTITION])
def test_broker_away_is_transient(code: int) -> None:
    exc = KafkaException(KafkaError(code))
    assert is_transient(exc) and not is_refused(exc)
    assert is_transient(SPARK_TEXT % KafkaError(code).name())


def test_partition_missing_from_a_restarting_brokers_metadata_is_transient() -> None:
    """Seen in a task reading the source just after a broker came back from SIGKILL: its first metadata
    answer lacked the partition, which Kafka's clients retry (UnknownTopicOrPartitionException is retriable)."""
    text = ('cimpl.KafkaException: KafkaError{code=_UNKNOWN_PARTITION,val=-190,'
            'str="Failed to get watermark offsets: Local: Unknown partition"}')
    assert is_transient(KafkaException(KafkaError(KafkaError._UNKNOWN_PARTITION))) and is_transient(text)


@pytest.mark.parametrize("code", [KafkaError._AUTHENTICATION, KafkaError.SASL_AUTHENTICATION_FAILED,
                                  KafkaError.TOPIC_AUTHORIZATION_FAILED])
def test_refused_credentials_are_never_retried(code: int) -> None:
    exc = KafkaException(KafkaError(code))
    assert is_refused(exc) and not is_transient(exc)
    assert is_refused(SPARK_TEXT % KafkaError(code).name()) and not is_transient(SPARK_TEXT % KafkaError(code).name())


def test_other_failures_are_neither() -> None:
    assert not is_transient(ValueError("bad record")) and not is_refused(ValueError("bad record"))


def test_retrying_waits_out_transient_failures_and_gives_up_at_the_deadline() -> None:
    calls = []

    def flaky() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise KafkaException(KafkaError(KafkaError._TRANSPORT))
        return "ok"

    assert retrying(flaky, "test", timeout_s=5, side="source", pause_s=0.01) == "ok" and len(calls) == 3
    with pytest.raises(KafkaException):
        retrying(lambda: (_ for _ in ()).throw(KafkaException(KafkaError(KafkaError._TRANSPORT))), "test",
                 timeout_s=0.05, side="source", pause_s=0.02)
    refused = []

    def refuse() -> None:
        refused.append(1)
        raise KafkaException(KafkaError(KafkaError._AUTHENTICATION))

    with pytest.raises(KafkaException):
        retrying(refuse, "test", timeout_s=5, side="source", pause_s=0.01)
    assert len(refused) == 1


def test_retrying_stops_at_once_when_whoever_waits_for_the_answer_is_gone() -> None:
    """A planning process whose JVM died (bench/chaos.py found one retrying on for minutes, an orphan)."""
    tries = []

    def away() -> None:
        tries.append(1)
        raise KafkaException(KafkaError(KafkaError._TRANSPORT))

    with pytest.raises(KafkaException):
        retrying(away, "test", timeout_s=600, side="source", pause_s=0.01, abandoned=lambda: len(tries) >= 2)
    assert len(tries) == 2


def test_retrying_says_it_waits_once_an_interval_not_once_a_try(caplog) -> None:
    calls = []

    def away() -> str:
        calls.append(1)
        if len(calls) < 30:
            raise KafkaException(KafkaError(KafkaError._DESTROY_BROKER))  # a broker gone from the metadata
        return "ok"

    assert retrying(away, "log start of t-0", timeout_s=5, side="source", pause_s=0.01, say_every_s=0.2) == "ok"
    said = [r.getMessage() for r in caplog.records if r.name == "streaming.kafka.failures"]
    assert 1 <= len(said) <= 3, said
    assert said[0].startswith("waiting for the source cluster: log start of t-0: ")


def test_restarts_back_off_reset_on_progress_and_give_up_without_it(monkeypatch) -> None:
    clock = [0.0]
    monkeypatch.setattr("streaming.job.failures.time.monotonic", lambda: clock[0])
    r = Restarts(timeout_s=100)
    assert [r.next_pause(5) for _ in range(7)] == [1, 2, 4, 8, 16, 30, 30]
    clock[0] = 50
    assert r.next_pause(6) == 1, "progress since the last failure starts over"
    clock[0] = 151
    assert r.next_pause(6) is None, "no progress for longer than the timeout: give up"


class _Metadata:
    """A client's metadata calls, recorded: what retrying asks of the client between two tries."""

    def __init__(self, fail: bool = False) -> None:
        self.asked: list[str | None] = []
        self.fail = fail

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> None:
        self.asked.append(topic)
        if self.fail:
            raise KafkaException(KafkaError(KafkaError._TIMED_OUT))


def test_retrying_refreshes_the_clients_metadata_between_tries_and_not_after_a_success() -> None:
    client, calls = _Metadata(), []

    def stale() -> str:
        calls.append(len(client.asked))  # how many refreshes came before this try
        if len(calls) < 3:
            raise KafkaException(KafkaError(KafkaError._TIMED_OUT))
        return "ok"

    assert retrying(stale, "watermarks of t-0", timeout_s=5, side="source", client=client, topic="t",
                    pause_s=0.01) == "ok"
    assert calls == [0, 1, 2] and client.asked == ["t", "t"]


def test_a_refresh_that_fails_leaves_the_next_try_to_say_why() -> None:
    client, calls = _Metadata(fail=True), []

    def once_more() -> str:
        calls.append(1)
        if len(calls) < 2:
            raise KafkaException(KafkaError(KafkaError._TRANSPORT))
        return "ok"

    assert retrying(once_more, "w", timeout_s=5, side="sink", client=client, topic="t", pause_s=0.01) == "ok"
    assert client.asked == ["t"]


def test_a_future_that_timed_out_is_retried_and_its_line_has_a_reason(caplog) -> None:
    calls = []

    def slow_future() -> str:
        calls.append(1)
        if len(calls) < 2:
            raise concurrent.futures.TimeoutError()  # no message of its own
        return "ok"

    assert retrying(slow_future, "the commit of consumer group g's offsets", timeout_s=5, side="sink",
                    pause_s=0.01) == "ok"
    said = [r.getMessage() for r in caplog.records if r.name == "streaming.kafka.failures"]
    assert said and re.search(r"no answer to the commit of consumer group g's offsets; since \d{4}-\d\d-\d\d "
                              r"\d\d:\d\d:\d\d UTC, retrying for up to 5s$", said[0]), said
    assert reason(concurrent.futures.TimeoutError()) == "TimeoutError"
    bare = KafkaException(KafkaError(KafkaError.NOT_COORDINATOR, "ConsumerGroupDescribe: "))
    assert reason(bare) == "ConsumerGroupDescribe: NOT_COORDINATOR", "a broker's error with no text of its own"
    assert reason(KafkaException(KafkaError(KafkaError._TIMED_OUT, "Failed to get watermark offsets"))) == \
        "Failed to get watermark offsets"


def test_retrying_makes_the_client_anew_between_tries_when_told_to() -> None:
    made, calls = [], []

    def timed_out_once() -> str:
        calls.append(len(made))
        if len(calls) < 2:
            raise KafkaException(KafkaError(KafkaError._TIMED_OUT))
        return "ok"

    client = _Metadata()
    assert retrying(timed_out_once, "w", timeout_s=5, side="sink", client=client, renew=lambda: made.append(1),
                    pause_s=0.01) == "ok"
    assert calls == [0, 1] and client.asked == []  # made anew, not asked for metadata


def test_a_failure_that_outlived_its_retries_is_one_line_naming_what_was_done() -> None:
    with pytest.raises(JobError) as raised, said_in_one_line("cannot verify t -> s"):
        raise KafkaException(KafkaError(KafkaError._TIMED_OUT, "no answer to end offsets of s"))
    assert str(raised.value) == "cannot verify t -> s: no answer to end offsets of s"
    with pytest.raises(JobError) as raised, said_in_one_line("cannot verify t -> s"):
        raise TimeoutError("s-0: could not read [0, 9) within 120s")
    assert str(raised.value) == "cannot verify t -> s: s-0: could not read [0, 9) within 120s"
