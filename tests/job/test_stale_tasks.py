"""A compaction task against a real broker: one the driver fenced the job's ids after it was made (a lost
executor's task, thawed after the next stage began) writes nothing; one whose sink moved after the driver
read it resumes from the sink's word, never from the driver's stale reading."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

from streaming.cleaner import CompactionConfig
from streaming.configuration.subscription import Subscribe
from streaming.job.compact import StageTask
from streaming.job.spec import JobMapping, JobSpec, TopicPlan
from streaming.job.stage_task import compact_partitions
from streaming.job.task_error import ErrorKind
from streaming.job.transaction_slots import TransactionSlots, is_stale
from streaming.kafka.admin import create_topic, unique_topic_name
from streaming.kafka.clients import read_committed
from streaming.kafka.headers.offset_header import source_offset
from streaming.kafka.sink.sink_state import read_states
from streaming.kafka.sink.task_emitter import SinkPartition, TaskEmitter
from streaming.kafka.sink.transactional_ids import transactional_id
from streaming.log import batch_from_records, make_record
from streaming.partition_id import PartitionId
from streaming.state.layout import LogDir, log_dir, open_partition_log
from streaming.state.stores import open_state_dir
from tests.kafka_helpers import ORIGINS

pytestmark = pytest.mark.integration

SOURCE = "orders"
CONFIG = CompactionConfig(max_compaction_lag_ms=1000)


def _records(count: int) -> list:
    past = int(time.time() * 1000) - 3_600_000
    return [make_record(i, b"k%d" % i, b"v%d" % i, past + i) for i in range(count)]


def _jobs(bootstrap: str, tmp_path, records: int, partitions: int) -> tuple[JobSpec, list[LogDir], str]:
    """A job of ``partitions`` partition logs, each holding ``records`` distinct keys, all cleanable."""
    sink = create_topic(bootstrap, unique_topic_name("stale"), partitions, {"cleanup.policy": "delete"})
    spec = JobSpec(JobMapping(bootstrap, Subscribe((SOURCE,)), bootstrap, "{topic}.s"), str(tmp_path),
                   {SOURCE: TopicPlan(SOURCE, sink, CONFIG, partitions)})
    state = open_state_dir(spec.state_dir)
    dirs = [LogDir(PartitionId(SOURCE, p), log_dir(state, SOURCE, p)) for p in range(partitions)]
    for d in dirs:
        open_partition_log(state, d, CONFIG.log_config).append(batch_from_records(_records(records)),
                                                               int(time.time() * 1000))
    return spec, dirs, sink


def _job(bootstrap: str, tmp_path, records: int) -> tuple[JobSpec, LogDir, str]:
    spec, [d], sink = _jobs(bootstrap, tmp_path, records, 1)
    return spec, d, sink


def _task(spec: JobSpec, d: LogDir | tuple[LogDir, ...], sink: str, fences: int,
          trusted: dict[PartitionId, int] | None = None) -> StageTask:
    dirs = d if isinstance(d, tuple) else (d,)
    sinks = read_states(AdminClient({"bootstrap.servers": spec.sink_bootstrap}),
                        [PartitionId(sink, x.pid.partition) for x in dirs], 10)
    return StageTask(dirs, 0, sinks, trusted or {}, {}, fences)


def _sink_offsets(bootstrap: str, sink: str) -> list[int]:
    return [source_offset(list(r.headers)) for r in read_committed(bootstrap, sink, 1)]


def test_a_task_made_before_the_drivers_latest_fence_writes_nothing(bootstrap_servers, tmp_path) -> None:
    spec, d, sink = _job(bootstrap_servers, tmp_path, 20)
    slots = TransactionSlots(open_state_dir(spec.state_dir), spec.job_id, {"bootstrap.servers": bootstrap_servers})
    slots.fence_if_needed()  # the run's first fence: the count is now 1
    stale = _task(spec, d, sink, fences=0)
    assert is_stale(open_state_dir(spec.state_dir), spec.job_id, 0)
    [report] = compact_partitions(stale, 0, spec, int(time.time() * 1000), drain=True)
    assert report.error is not None and report.error.kind is ErrorKind.FENCED, report.error
    assert "fenced after this task was made" in report.error.message
    assert _sink_offsets(bootstrap_servers, sink) == [], "nothing written, nothing committed"

    [report] = compact_partitions(_task(spec, d, sink, fences=slots.fences), 0, spec, int(time.time() * 1000),
                                  drain=True)
    assert report.error is None and report.emitted == 20
    assert _sink_offsets(bootstrap_servers, sink) == list(range(20))


def test_a_task_whose_trusted_sink_moved_after_the_driver_read_it_resumes_from_the_sink(bootstrap_servers,
                                                                                       tmp_path) -> None:
    """The driver trusted the sink at source offset 9, then an earlier attempt of the task (the same id)
    committed through 14 before this one began: it resumes after 14, not after 9."""
    spec, d, sink = _job(bootstrap_servers, tmp_path, 20)
    task = _task(spec, d, sink, fences=0, trusted={d.pid: -1})  # as the driver read it: empty, trusted
    earlier = TaskEmitter(bootstrap_servers, transactional_id(spec.job_id, 0), origins=ORIGINS)
    part = SinkPartition(PartitionId(sink, 0), -1)
    earlier.emit([(part, [batch_from_records(_records(15))])])
    earlier.close()
    assert part.emitted_up_to == 14
    [report] = compact_partitions(task, 1, spec, int(time.time() * 1000), drain=True)
    assert report.error is None, report.error
    assert _sink_offsets(bootstrap_servers, sink) == list(range(20)), "every record once"


def test_a_stale_task_leaves_its_successors_open_transaction_alone(bootstrap_servers, tmp_path) -> None:
    """The task finds it is stale before its init_transactions, which would abort the transaction a later stage's
    task (the same transactional id) has open: that one still commits."""
    spec, d, sink = _job(bootstrap_servers, tmp_path, 20)
    slots = TransactionSlots(open_state_dir(spec.state_dir), spec.job_id, {"bootstrap.servers": bootstrap_servers})
    slots.fence_if_needed()
    successor = Producer({"bootstrap.servers": bootstrap_servers, "transactional.id": transactional_id(spec.job_id, 0)})
    successor.init_transactions(30)
    successor.begin_transaction()
    successor.produce(sink, key=b"k", value=b"the successor's", partition=0)
    assert successor.flush(30) == 0
    [report] = compact_partitions(_task(spec, d, sink, fences=0), 0, spec, int(time.time() * 1000), drain=True)
    assert report.error is not None and report.error.kind is ErrorKind.FENCED, report.error
    successor.commit_transaction(30)  # KafkaException (fenced, aborted) when the stale task took its epoch
    assert [r.value for r in read_committed(bootstrap_servers, sink, 1)] == [b"the successor's"]


def test_each_partition_a_task_reads_from_its_sink_is_recorded_with_its_own_end(bootstrap_servers, tmp_path) -> None:
    """Two sink partitions of different ends, neither trusted: each report says the end its own partition showed
    (the driver trusts a partition only while it is as recorded: a wrong end is never trusted, read every stage)."""
    spec, dirs, sink = _jobs(bootstrap_servers, tmp_path, 5, 2)
    other = Producer({"bootstrap.servers": bootstrap_servers})
    for partition, count in ((0, 3), (1, 7)):
        for i in range(count):
            other.produce(sink, key=b"other-%d" % i, value=b"x", partition=partition)
    assert other.flush(30) == 0
    task = _task(spec, tuple(dirs), sink, fences=0)
    reports = compact_partitions(task, 0, spec, int(time.time() * 1000), drain=True)
    assert all(r.error is None for r in reports), [r.error for r in reports]
    ends = {p.partition: s.high for p, s in task.sinks.items()}
    assert ends == {0: 3, 1: 7}
    assert {r.pid.partition: r.sink_seen for r in reports} == \
        {p: (task.sinks[PartitionId(sink, p)].topic_id, end) for p, end in ends.items()}
