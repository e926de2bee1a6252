"""A transaction left open on a sink partition: an alarm until it ends, and ended by the job only when it is the
job's own.

A last stable offset that stays below the high watermark holds every read_committed reader of the partition
there, the job's own reading of its progress included. Tasks report such partitions and emit nothing to
them; between two stages, when no task of the job writes, the driver resolves them (resolve):
1. it fences every transactional id of the job: InitProducerId makes the coordinator abort a transaction of
   that id it still holds open, and write its markers before it answers;
2. it ends what Kafka left open without markers (the coordinator skips them for a partition that has no
   leader at that moment, KAFKA-5202): each id of the job begins a transaction on the partition, writes one
   record (header kcompact.abort, never read) and aborts it. The abort's marker ends every open transaction of
   that producer id on the partition, whatever epoch began it, and nobody else's;
3. one still open after that is another writer's. kcompact never aborts it, nor advises an abort at its
   start offset, which would end another writer's work: it is named, with the command that shows its
   producer, and the partition's emission waits, as every read_committed reader of it does, until its writer
   ends it.

Whose a transaction is, is known by what the job's own markers can end: librdkafka (and so confluent-kafka)
has no DescribeProducers or DescribeTransactions to ask the broker, and markers are applied by producer id.
"""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from typing import Mapping, Sequence

from streaming.kafka.failures import TRY_S
from streaming.kafka.sink.task_emitter import waiting
from streaming.kafka.sink.transactional_ids import fencing_producer
from streaming.partition_id import PartitionId

log = logging.getLogger(__name__)

ABORT_HEADER = "kcompact.abort"  # on the one record of the abort that ends a transaction Kafka left open


def _abort_in(client_config: Mapping[str, str], transactional_id: str, partitions: Sequence[PartitionId]) -> None:
    """With ``transactional_id``: a transaction of one record on each partition, aborted."""
    producer = fencing_producer(client_config, transactional_id)
    try:
        producer.begin_transaction()
        for p in partitions:  # a key: a compacted sink refuses a record without one
            producer.produce(p.topic, None, b"", p.partition, headers=[(ABORT_HEADER, b"")])
        if producer.flush(60):
            raise TimeoutError(f"{transactional_id}: the abort's records were not acknowledged within 60s")
        waiting(lambda: producer.abort_transaction(TRY_S), f"the abort of {transactional_id}'s transaction", producer)
    finally:
        producer.flush(0)


def end_own(client_config: Mapping[str, str], ids: Sequence[str], partitions: Sequence[PartitionId]) -> None:
    """Steps 1 and 2 above, for every partition at once, each id's init_transactions being its fence: what the
    job's ids can end of what is open there."""
    with ThreadPoolExecutor(max_workers=min(16, len(ids)), thread_name_prefix="abort") as pool:
        list(pool.map(lambda tid: _abort_in(client_config, tid, partitions), ids))
