"""The state table read from a state dir (streaming.table.state_reader) against the reference model: every
strategy, with and without tombstones, as of offsets and times inside and outside each log's exact range."""

from __future__ import annotations

import pytest

from streaming.cleaner.live_state import AsOfError, earliest_exact
from streaming.errors import UsageError
from streaming.log.manifest import load_newest
from streaming.partition_id import PartitionId
from streaming.state.stores import open_state_dir
from streaming.table.state_reader import TableQuery, logs_to_read, parse_as_of_offsets, read_log
from tests.table.state_dirs import STRATEGIES, expected, state_dir, table_rows


def _read(uri: str, query: TableQuery) -> set[tuple]:
    return table_rows([r for item in logs_to_read(uri, query) for b in read_log(item) for r in b.to_pylist()])


def _exact(uri: str, pid: PartitionId) -> tuple[int, int]:
    state = open_state_dir(uri)
    manifest = load_newest(state.storage, state.path("logs", f"{pid.topic}-{pid.partition}")).manifest
    return earliest_exact(manifest), manifest.segments[-1].next_offset


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return state_dir(str(tmp_path_factory.mktemp("state")))


@pytest.mark.parametrize("tombstones", [False, True], ids=["live", "with-tombstones"])
@pytest.mark.parametrize("topic", list(STRATEGIES))
def test_each_strategy_gives_the_models_winners(model, topic: str, tombstones: bool) -> None:
    got = _read(model.uri, TableQuery(topics=frozenset({topic}), tombstones=tombstones))
    assert got == expected(model, tombstones=tombstones, topics={topic})
    assert any(r[5] is None for r in got) == tombstones


def test_as_of_offsets_inside_the_exact_range_give_the_state_then(model) -> None:
    pid = PartitionId("by-header", 1)
    exact, end = _exact(model.uri, pid)
    assert 0 < exact < end, "the fixture cleans half of each log"
    for at in (exact, (exact + end) // 2, end):
        got = _read(model.uri, TableQuery(topics=frozenset({pid.topic}), as_of_offsets={pid: at}))
        want = expected(model, {pid: at}, topics={pid.topic})
        assert got == want and got, at


def test_an_as_of_offset_before_the_exact_range_is_refused_naming_the_earliest_exact_point(model) -> None:
    pid = PartitionId("by-offset", 0)
    exact, _ = _exact(model.uri, pid)
    with pytest.raises(AsOfError, match=rf"^by-offset-0: as-of offset {exact - 1} is before the earliest exact "
                                        rf"point, offset {exact}: "):
        logs_to_read(model.uri, TableQuery(as_of_offsets={pid: exact - 1}))


def test_an_as_of_time_before_the_exact_range_is_refused_and_one_after_it_reads_through_that_offset(model) -> None:
    pid = PartitionId("by-time", 0)
    records = model.records[pid]
    exact, _ = _exact(model.uri, pid)
    with pytest.raises(AsOfError, match=r"before the earliest exact point, offset \d+ \(asOfTimestamp (\d+) or later\)") as e:
        _read(model.uri, TableQuery(topics=frozenset({"by-time"}), as_of_timestamp_ms=records[0]["timestamp"] - 1))
    after = int(e.value.args[0].split("asOfTimestamp ")[1].split()[0]) + 10**7  # past every record's time
    got = _read(model.uri, TableQuery(topics=frozenset({"by-time"}), as_of_timestamp_ms=after))
    assert got == expected(model, topics={"by-time"})


def test_as_of_offsets_are_checked_in_one_line_each() -> None:
    with pytest.raises(UsageError, match="asOfOffsets must be JSON like"):
        parse_as_of_offsets("{\"orders\": 3}")
    with pytest.raises(UsageError, match=r"offsets are 0 or more, or -1 for as now \(orders-0: -2\)"):
        parse_as_of_offsets("{\"orders\": {\"0\": -2}}")


def test_a_topic_or_partition_the_job_does_not_have_is_named(model) -> None:
    with pytest.raises(UsageError, match="topic 'nope' is not mirrored"):
        logs_to_read(model.uri, TableQuery(topics=frozenset({"nope"})))
    with pytest.raises(UsageError, match="no log of: by-offset-7"):
        logs_to_read(model.uri, TableQuery(as_of_offsets={PartitionId("by-offset", 7): 3}))
    with pytest.raises(AsOfError, match="past the log's end"):
        logs_to_read(model.uri, TableQuery(as_of_offsets={PartitionId("by-offset", 0): 10**6}))


def test_reads_beside_a_writing_job_each_see_one_commit_of_the_log(tmp_path) -> None:
    """A job appends, cleans and, as at the end of each run, deletes every object its newest manifest does
    not name, while reads go on: each read is the model's state at the end it reports (its read hold keeps
    the objects of the manifest it loaded)."""
    import threading

    from streaming.state.layout import LogDir, open_partition_log
    from streaming.state.stores import open_state_dir
    from streaming.table.state_reader import opened_log
    from tests.table.state_dirs import config_of

    model = state_dir(str(tmp_path / "state"), partitions=1)
    pid = PartitionId("by-header", 0)
    state = open_state_dir(model.uri)
    done = threading.Event()

    def job() -> None:
        try:
            for _ in range(25):
                model.append(pid, 15)
                open_partition_log(state, LogDir.of(state, pid), config_of("header").log_config).collect_at_end()
        finally:
            done.set()

    writer = threading.Thread(target=job)
    writer.start()
    seen: list[tuple[int, set]] = []
    item = logs_to_read(model.uri, TableQuery(topics=frozenset({pid.topic})))[0]
    while not done.is_set() or not seen:
        with opened_log(item) as live:
            seen.append((live.end, table_rows([r for b in live.batches for r in b.to_pylist()])))
    writer.join()
    assert len({end for end, _ in seen}) > 3, "reads saw the log at several commits"
    for end, rows in seen:
        assert rows == expected(model, {pid: end}, topics={pid.topic}), end
