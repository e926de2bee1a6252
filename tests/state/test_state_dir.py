"""The state dir: its names, documents replaced whole, and the locks that keep writers apart."""

from __future__ import annotations

import os
import threading
import time

import pytest

from streaming.errors import JobError
from streaming.state.files import read_json, write_json
from streaming.state.layout import list_log_dirs, log_dir
from streaming.state.locks import StateDirLock, partition_lock


def test_log_dirs_are_listed_with_their_topic_and_partition_even_when_the_topic_has_dashes(tmp_path) -> None:
    for topic, p in (("orders-eu-2", 0), ("orders-eu-2", 11), ("x", 3)):
        os.makedirs(log_dir(str(tmp_path), topic, p))
    os.makedirs(os.path.join(tmp_path, "logs", "not-a-partition"))
    assert [(t, p) for t, p, _ in list_log_dirs(str(tmp_path))] == [("orders-eu-2", 0), ("orders-eu-2", 11), ("x", 3)]


def test_a_document_is_replaced_whole_and_a_missing_one_reads_as_none(tmp_path) -> None:
    path = str(tmp_path / "doc.json")
    assert read_json(path) is None
    write_json(path, {"a": 1})
    write_json(path, {"a": 2, "b": [1, 2]})
    assert read_json(path) == {"a": 2, "b": [1, 2]} and os.listdir(tmp_path) == ["doc.json"]


def test_a_second_compactor_is_refused_naming_the_holder(tmp_path) -> None:
    held = StateDirLock(str(tmp_path))
    try:
        with pytest.raises(JobError, match=f"in use by another compactor \\(pid {os.getpid()}\\)"):
            StateDirLock(str(tmp_path))
    finally:
        held.release()
    StateDirLock(str(tmp_path)).release()


def test_a_partition_writer_waits_for_the_one_before_it(tmp_path) -> None:
    order: list[str] = []
    with partition_lock(str(tmp_path)):
        def second() -> None:
            with partition_lock(str(tmp_path)):
                order.append("second")
        t = threading.Thread(target=second)
        t.start()
        time.sleep(0.3)
        order.append("first")
    t.join(10)
    assert order == ["first", "second"]
    with partition_lock(str(tmp_path)):
        with pytest.raises(TimeoutError, match="still locked"):
            with partition_lock(str(tmp_path), timeout_s=0.2):
                pass
