"""A start runs in one state dir: the one its options name, or the one its caller holds; never both or neither,
which is refused before anything is read or created."""

from __future__ import annotations

import pytest

from streaming.cleaner import Overrides
from streaming.job.options import RunOptions
from streaming.startup.assembly import Launch, start
from streaming.state.stores import open_state_dir

LAUNCH = Launch({}, {}, Overrides.parse({}), "WARNING", "text")
OPTIONS = {"bootstrap.servers": "127.0.0.1:1", "source.topic": ("orders",), "sink.topic": "orders.c", "once": True}


def test_a_start_given_no_state_dir_is_refused_before_anything_is_asked(tmp_path) -> None:
    with pytest.raises(ValueError, match="one state dir"):
        start(RunOptions.of(OPTIONS), LAUNCH)


def test_a_start_given_two_state_dirs_is_refused_before_anything_is_asked(tmp_path) -> None:
    options = RunOptions.of({**OPTIONS, "state.dir": str(tmp_path / "named")})
    with pytest.raises(ValueError, match="one state dir"):
        start(options, LAUNCH, held=open_state_dir(str(tmp_path / "held")))
    assert not any(tmp_path.iterdir()), "neither state dir was made"
