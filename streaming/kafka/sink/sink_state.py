"""What a sink partition holds, read in bulk: its topic's id, its log start, its last stable offset and its high
watermark. One request per leader for each offset and one for the topics' ids, however many partitions: the
driver reads every partition's before a stage, and each task its own again after its fence.

The topic id is the sink's identity: a topic deleted and made again has the same name and a new id, so an
end offset that happens to match (someone else's records up to the old end) does not pass for the sink the
job wrote to.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Iterable, Mapping

from confluent_kafka import IsolationLevel, KafkaError, KafkaException, TopicCollection, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from streaming.kafka.answers import answers, settle
from streaming.kafka.client_settings import client_settings
from streaming.kafka.failures import TRY_S, retrying
from streaming.partition_id import PartitionId


@dataclass(frozen=True)
class SinkPartitionState:
    topic_id: str
    low: int     # the log start
    stable: int  # the last stable offset: where a read_committed reader stops
    high: int    # the high watermark

    @property
    def empty(self) -> bool:
        return self.high == self.low

    @property
    def open(self) -> bool:
        """Records past the last stable offset: a transaction has not ended (its markers may be on their way)."""
        return self.high > self.stable


def topic_ids(admin: AdminClient, topics: Iterable[str], timeout_s: float) -> dict[str, str]:
    """Each existing topic's id; a topic that does not exist is left out."""
    names = sorted(set(topics))
    if not names:
        return {}
    out = {}
    described = admin.describe_topics(TopicCollection(names), request_timeout=timeout_s)
    settle(described.values(), timeout_s)
    for topic, future in described.items():
        try:
            out[topic] = str(future.result(timeout_s).topic_id)
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.UNKNOWN_TOPIC_OR_PART:
                raise
    return out


def read_states(admin: AdminClient, partitions: Iterable[PartitionId], timeout_s: float
                ) -> dict[PartitionId, SinkPartitionState]:
    """The sink partitions' states, all requests at once; a partition of a topic that does not exist is left
    out."""
    pids = list(partitions)
    ids = topic_ids(admin, (p.topic for p in pids), timeout_s)
    tps = [TopicPartition(p.topic, p.partition) for p in pids if p.topic in ids]
    if not tps:
        return {}
    offsets = answers([admin.list_offsets({tp: spec for tp in tps}, isolation_level=level, request_timeout=timeout_s)
                       for spec, level in ((OffsetSpec.earliest(), IsolationLevel.READ_UNCOMMITTED),
                                           (OffsetSpec.latest(), IsolationLevel.READ_COMMITTED),
                                           (OffsetSpec.latest(), IsolationLevel.READ_UNCOMMITTED))], timeout_s)
    return {PartitionId(tp.topic, tp.partition): SinkPartitionState(ids[tp.topic], *(o[tp] for o in offsets))
            for tp in tps}


def settled(read: Callable[[list[PartitionId]], Mapping[PartitionId, SinkPartitionState]],
            states: Mapping[PartitionId, SinkPartitionState], within_s: float, pause_s: float
            ) -> dict[PartitionId, SinkPartitionState]:
    """``states``, those showing a transaction open read again for up to ``within_s``: the markers of one that
    just ended land a moment after its commit. A partition the read leaves out keeps its last state."""
    states = dict(states)
    deadline = time.monotonic() + within_s
    while any(s.open for s in states.values()) and time.monotonic() < deadline:
        time.sleep(pause_s)
        states.update(read([p for p, s in states.items() if s.open]))
    return states


class SinkStateReader:
    """read_states with an admin client of its own, made when first needed: a task's reading of its sinks.
    It asks in tries of TRY_S, with a new client after a failed one, for up to ``timeout_s``: an admin client
    keeps asking a leader that died, where a new one learns the elected leader at once."""

    def __init__(self, client_config: Mapping[str, str], timeout_s: float = 30.0) -> None:
        self.client_config, self.timeout_s = dict(client_config), timeout_s
        self._admin: AdminClient | None = None
        self._retired: list[AdminClient | None] = []

    def read(self, partitions: Iterable[PartitionId]) -> dict[PartitionId, SinkPartitionState]:
        pids = list(partitions)

        def once() -> dict[PartitionId, SinkPartitionState]:
            if self._admin is None:
                self._admin = AdminClient(client_settings(self.client_config))
            return read_states(self._admin, pids, TRY_S)

        def renew() -> None:  # the old client kept: freed by its futures' callback thread, librdkafka aborts
            self._retired.append(self._admin)
            self._admin = None
        return retrying(once, f"the states of {len(pids)} sink partitions", self.timeout_s, side="sink",
                        renew=renew, pause_s=0.2)
