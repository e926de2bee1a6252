"""Sink partitions held by a transaction left open on them: read_committed readers stop at its start, so the job
emits nothing to the partition until it ends. Found by a task, resolved by the driver (job.sink_watch), kept
in the state dir (open-transactions.json) for `kcompact status` and `verify`, which load no Kafka client."""

from __future__ import annotations

from dataclasses import dataclass

from streaming.log.storage import read_json, write_json
from streaming.partition_id import PartitionId
from streaming.state.layout import open_transactions_file
from streaming.state.stores import StateDir
from streaming.utc import utc_text


@dataclass(frozen=True)
class OpenTransaction:
    """A transaction open on a sink partition: it begins at ``start`` (the last stable offset), and has been
    seen since ``since_ms``; ``another_writers``: the job's own markers did not end it (False: not known yet,
    as a task finds it)."""

    sink: PartitionId
    start: int
    since_ms: int
    another_writers: bool = False

    def describe(self, bootstrap_servers: str) -> str:
        return (f"another writer's transaction is open on {self.sink} at sink offset {self.start} since "
                f"{utc_text(self.since_ms)} UTC: read_committed readers of it stop there, and the job emits nothing "
                f"to it until its writer ends it (kcompact never aborts another writer's transaction; "
                f"kafka-transactions.sh --bootstrap-server {bootstrap_servers} describe-producers --topic "
                f"{self.sink.topic} --partition {self.sink.partition} names its producer)")


def read_held(state: StateDir) -> dict[PartitionId, OpenTransaction]:
    """The other writers' transactions holding the job's sink partitions, by sink partition."""
    doc = read_json(state.storage, open_transactions_file(state)) or {}
    return {pid: OpenTransaction(pid, v["start"], v["since_ms"], True) for k, v in doc.items()
            if (pid := PartitionId.from_name(k)) is not None}


def write_held(state: StateDir, held: dict[PartitionId, OpenTransaction]) -> None:
    write_json(state.storage, open_transactions_file(state),
               {str(p): {"start": t.start, "since_ms": t.since_ms} for p, t in held.items()})
