"""The job's transactional ids, and fencing them.

A compaction task emits its partitions through one transactional producer, whose id is its slot's: task i of
a stage writes as ``kcompact-<job>-<i>``. The ids are few and reused (a broker keeps each one for
transactional.id.expiration.ms: one id per stage or per attempt would fill its memory, FLINK-34554), and
carry the job's identity, so two jobs writing to one sink cluster never fence each other. A retried attempt
of task i has task i's partitions and id, so its init_transactions fences the attempt it replaces. A
partition may be in another task, with another id, at the next stage: the driver fences every id the job
has used (fence) before a stage whose partitions an earlier writer may still be writing, at the start of a
run and after a stage that did not end cleanly.
"""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from typing import Mapping, Sequence

from confluent_kafka import Producer

from streaming.kafka.client_settings import client_settings
from streaming.kafka.failures import TRY_S, retrying

log = logging.getLogger(__name__)

TRANSACTIONAL_PREFIX = "kcompact-"  # every transactional id starts so: what a prefixed ACL grants
FENCE_TIMEOUT_S = 60.0


def transactional_id(job_id: str, slot: int) -> str:
    return f"{TRANSACTIONAL_PREFIX}{job_id}-{slot}"


def job_ids(job_id: str, slots: int) -> list[str]:
    """Every id a job that has run ``slots`` tasks at once at most may have written with."""
    return [transactional_id(job_id, slot) for slot in range(slots)]


def fencing_producer(client_config: Mapping[str, str], tid: str) -> Producer:
    """A producer of ``tid`` past its InitProducerId: the coordinator has bumped the id's epoch, so an earlier
    producer of it can commit nothing more, and aborted its open transaction (its markers written before it
    answers)."""
    producer = Producer(client_settings({**client_config, "transactional.id": tid}))
    try:
        retrying(lambda: producer.init_transactions(TRY_S), f"the transaction coordinator of {tid}",
                 FENCE_TIMEOUT_S, side="sink", client=producer)
    except BaseException:
        producer.flush(0)
        raise
    return producer


def fence(client_config: Mapping[str, str], ids: Sequence[str]) -> None:
    """Every id's earlier producers fenced, all at once."""
    if not ids:
        return
    with ThreadPoolExecutor(max_workers=min(16, len(ids)), thread_name_prefix="fence") as pool:
        list(pool.map(lambda tid: fencing_producer(client_config, tid).flush(0), ids))
    log.debug("fenced the job's transactional ids %s..%s", ids[0], ids[-1])
