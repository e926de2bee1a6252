"""A job switched away from does not mirror in its old direction again, unless forced, and says so in one line."""

from __future__ import annotations

import pytest

from streaming.disaster.mark import mark, refuse_old_direction, switched
from streaming.disaster.report import Switch, SwitchReport
from streaming.errors import JobError
from streaming.state.stores import open_state_dir


def test_a_promoted_job_is_refused_until_forced_and_force_clears_the_mark(tmp_path, caplog) -> None:
    state = open_state_dir(str(tmp_path))
    refuse_old_direction(state, force=False)  # never switched: nothing to refuse
    mark(state, SwitchReport(Switch.PROMOTE, 1_795_000_000_000, False, True, ()))
    with pytest.raises(JobError, match=r"was promoted at 2026-.* UTC: .*give --force"):
        refuse_old_direction(state, force=False)
    refuse_old_direction(state, force=True)
    assert switched(state) is None
    assert "--force: the job of" in caplog.text
