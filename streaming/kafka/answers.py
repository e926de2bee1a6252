"""Answers to an admin client's requests, read so that no client is dropped while a request of it is out.

librdkafka's background thread answers a request through the client that made it, and a client destroyed in the
meantime crashed the process holding it: the source's planner process died of a segfault in pthread_mutex_lock as a
topic was being created. Its reader raised on the first failed answer, with the other request still out, and made a
new client for the retry. So requests made at once are read once all of them are answered."""

from __future__ import annotations

import concurrent.futures
from typing import Iterable, Mapping, Sequence

from confluent_kafka import KafkaError, KafkaException, TopicPartition

from streaming.kafka.failures import LEADERLESS, kafka_error

SETTLE_MARGIN_S = 2.0  # past a request's own timeout: librdkafka's timer and the callback thread's hand-over


def settle(futures: Iterable[concurrent.futures.Future], timeout_s: float) -> None:
    """Wait until every one of the requests has its answer: librdkafka fails a request at its own timeout, so a
    little past ``timeout_s`` all have one."""
    concurrent.futures.wait(list(futures), timeout=timeout_s + SETTLE_MARGIN_S)


def answers(asked: Sequence[Mapping[TopicPartition, concurrent.futures.Future]], timeout_s: float
            ) -> list[dict[TopicPartition, int]]:
    """The offsets of ListOffsets requests made at once, read when all of them are answered."""
    settle((f for request in asked for f in request.values()), timeout_s)
    return [{tp: answered(tp, f) for tp, f in request.items()} for request in asked]


def answered(tp: TopicPartition, future: concurrent.futures.Future) -> int:
    """A settled ListOffsets answer: the offset, or, for a partition whose leader is moving, which answers with no
    offset (-1001) rather than an error, a transient error that the caller's retry waits out; so is a
    partition with no leader at all (LEADERLESS). One still unanswered raises TimeoutError, also waited out."""
    try:
        offset = future.result(timeout=0).offset
    except KafkaException as exc:
        err = kafka_error(exc)
        if err is None or err.code() != LEADERLESS:
            raise
        raise KafkaException(KafkaError(KafkaError.LEADER_NOT_AVAILABLE, f"no leader for {tp.topic}-{tp.partition} "
                                        f"yet ({err.str()})", retriable=True)) from exc
    if offset < 0:
        raise KafkaException(KafkaError(KafkaError.OFFSET_NOT_AVAILABLE, f"no offset for {tp.topic}-{tp.partition} "
                                        f"(its leader is moving)", retriable=True))
    return offset
