"""What the job asks of the engine that runs it: a streaming query over the source, stages of tasks, and
how far a stage has got. Spark answers it (streaming.spark.driver); job/ only sees these types, so its
stages are plain functions of typed arguments and never touch a Spark object."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Mapping, Protocol, Sequence, TypeVar

from streaming.configuration.subscription import StartingOffsets, Subscription
from streaming.partition_id import PartitionId

if TYPE_CHECKING:  # types only: append.py hands micro-batches to the engine (no import cycle), and the source's
    # options, loaded by Spark's planning process for every query, need none of the log
    from streaming.job.append import AppendTask
    from streaming.job.append_counts import PartitionAppended
    from streaming.log.storage import Storage

T = TypeVar("T")
R = TypeVar("R")

@dataclass(frozen=True)
class SourceRead:
    """What the query reads: the source cluster, its topics and where to start, under kcompact's own terms."""

    bootstrap_servers: str
    subscription: Subscription
    starting_offsets: StartingOffsets = StartingOffsets()
    fail_on_data_loss: bool = True
    max_offsets_per_trigger: int | None = None
    max_read_tasks: int | None = None  # None: a task per partition with records
    kafka: Mapping[str, str] = field(default_factory=dict, repr=False)  # librdkafka settings; may hold secrets
    kafka_native: bool = True  # records fetched by the native path where it can run (--kafka-native)


@dataclass(frozen=True)
class QueryPlan:
    source: SourceRead
    checkpoint_location: str
    once: bool  # read what is there now, then end (Spark's availableNow); else a trigger every interval
    trigger_interval_s: float = 5.0


class MicroBatch(Protocol):
    """One micro-batch of the source, planned but not read: reading it on the executors appends it."""

    def append(self, task: AppendTask) -> list[PartitionAppended]:
        """Read the batch, one task per source partition, each appending what it reads to the partition logs
        as ``task`` says (streaming.job.append.append_partitions); what each partition's append did."""


class EngineProcessLost(RuntimeError):
    """A Python process of the engine ended under the query: the planner of the source's offsets, or the worker of
    a micro-batch's task (killed, or crashed in a native library). Nothing was lost with it: the offsets live in
    the query's checkpoint and appends are idempotent, so the job starts the query again and the batch is read
    again."""


class RunningQuery(Protocol):
    @property
    def is_active(self) -> bool: ...

    def stop(self) -> None: ...

    def exception(self) -> BaseException | None:
        """Why the query ended, if it failed: EngineProcessLost when a Python process of the engine died."""


class Engine(Protocol):
    def start(self) -> None:
        """Start now what the engine starts on first use (Spark's session and its JVM)."""

    def committed_offsets(self, storage: Storage, checkpoint: str) -> dict[PartitionId, int] | None:
        """Where the query of ``checkpoint`` (a directory of ``storage``) ended its last committed
        micro-batch, read without starting anything; None when it has none."""

    def start_query(self, plan: QueryPlan, on_batch: Callable[[MicroBatch, int], None]) -> RunningQuery:
        """Start the query; ``on_batch`` runs on the driver for each micro-batch, with its id."""

    def run_tasks(self, task: Callable[[T, int], R], items: Sequence[T]) -> list[R]:
        """One task per item, run on the executors, each called with its item and its attempt (0 the first; a
        task retried after a failure or a lost executor runs again with the next); their results in the items'
        order."""

    def slots(self) -> int:
        """How many tasks run at once."""

    def tasks_done(self) -> tuple[int, int] | None:
        """(tasks done, tasks) of the stages running now; None when none runs."""

    def stop_begun(self) -> None:
        """The job's stop has begun: what the engine's processes say as they are hung up on from now is the
        stop's doing, not a failure."""
