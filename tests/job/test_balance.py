"""spread: many partitions in a few tasks of about equal work, so a stage or a micro-batch over thousands of
partitions costs a handful of tasks; nothing is lost or repeated, and a busy partition is not crowded."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from streaming.job.balance import ITEM_COST, spread


@given(st.lists(st.integers(0, 10**6), max_size=300), st.integers(1, 16))
def test_every_item_lands_in_exactly_one_of_at_most_the_tasks_given(records: list[int], tasks: int) -> None:
    items = list(range(len(records)))
    groups = spread(items, records, tasks)
    assert sorted(i for g in groups for i in g) == items
    assert len(groups) <= tasks and all(groups) and all(g == sorted(g) for g in groups)


@given(st.lists(st.integers(0, 10**6), min_size=1, max_size=300), st.integers(1, 16))
def test_no_task_holds_more_than_its_share_plus_the_largest_item(records: list[int], tasks: int) -> None:
    """The LPT bound: the heaviest group exceeds the mean by less than one item's work."""
    work = [ITEM_COST + n for n in records]
    groups = spread(list(range(len(records))), records, tasks)
    heaviest = max(sum(work[i] for i in g) for g in groups)
    assert heaviest <= sum(work) / len(groups) + max(work)


def test_two_thousand_idle_partitions_and_four_hot_ones_make_eight_tasks_with_the_hot_ones_apart() -> None:
    records = [1_000_000] * 4 + [0] * 2_000
    groups = spread(list(range(len(records))), records, 8)
    assert len(groups) == 8
    assert sorted(sum(i < 4 for i in g) for g in groups) == [0, 0, 0, 0, 1, 1, 1, 1]
