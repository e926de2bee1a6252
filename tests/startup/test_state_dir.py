"""The state dir a job is to run in is read before anything is created: one of another mapping, one switched away
from or one others can read is said in one line, and a refused one is left as it was."""

from __future__ import annotations

import os

import pytest

from streaming.configuration.subscription import Subscribe, SubscribePattern
from streaming.disaster.mark import mark, switched
from streaming.disaster.report import Switch, SwitchReport
from streaming.errors import JobError
from streaming.job.spec import JobMapping, JobSpec
from streaming.startup.state_dir import checked_state_dir
from streaming.state.stores import open_state_dir

MAPPING = JobMapping("b:1", SubscribePattern("orders.*"), "b:2", "{topic}.c")


def test_a_new_state_dir_is_checked_without_being_made(tmp_path) -> None:
    uri = str(tmp_path / "new")
    assert checked_state_dir(uri, MAPPING).uri == uri
    assert not os.path.exists(uri), "the checks only read: the dir is made once the sink topics are there"


def test_a_state_dir_of_another_mapping_is_refused(tmp_path) -> None:
    JobSpec(MAPPING, str(tmp_path), {}).save(open_state_dir(str(tmp_path)))
    other = JobMapping("b:1", Subscribe(("orders",)), "b:2", "{topic}.c")
    with pytest.raises(JobError, match="belongs to another mapping"):
        checked_state_dir(str(tmp_path), other)


def test_a_state_dir_switched_away_from_is_refused_and_force_clears_its_mark(tmp_path) -> None:
    state = open_state_dir(str(tmp_path))
    mark(state, SwitchReport(Switch.FAILOVER, 1_795_000_000_000, False, True, ()))
    with pytest.raises(JobError, match="was failed over at .*give --force"):
        checked_state_dir(str(tmp_path), MAPPING)
    assert switched(state) is not None, "a refused state dir keeps its mark"
    checked_state_dir(str(tmp_path), MAPPING, force=True)
    assert switched(state) is None


def test_a_state_dir_others_can_read_is_warned_of(tmp_path, caplog) -> None:
    tmp_path.chmod(0o755)
    checked_state_dir(str(tmp_path), MAPPING)
    assert f"--state-dir {tmp_path} can be read by other users" in caplog.text
