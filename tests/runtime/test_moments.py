"""The failover drill's hold: the first to reach the named moment waits for the release, once; other moments and
later arrivals pass."""

from __future__ import annotations

import os
import threading
import time

from streaming.runtime.moments import HOLD_ENV, HOLDER, REACHED, RELEASE, Moment, reached


def test_the_first_to_reach_the_moment_holds_until_released_and_no_one_after_it(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv(HOLD_ENV, f"{Moment.COMMIT.value}:{tmp_path}")
    reached(Moment.FLUSH, "sink-0")  # another moment: passes
    assert not (tmp_path / REACHED).exists()
    done = threading.Event()
    held = threading.Thread(target=lambda: (reached(Moment.COMMIT, "sink-1"), done.set()))
    held.start()
    try:
        deadline = time.monotonic() + 10
        while not (tmp_path / REACHED).exists():
            assert time.monotonic() < deadline
            time.sleep(0.001)
        assert (tmp_path / REACHED).read_text() == "sink-1", "it appears whole"
        assert (tmp_path / HOLDER).read_text() == str(os.getpid()), "after the holder's id, which a drill kills"
        assert not done.wait(0.3), "it waits for the release"
        began = time.monotonic()
        reached(Moment.COMMIT, "sink-0")  # a second arrival while the first holds: passes at once
        assert time.monotonic() - began < 0.1
    finally:
        (tmp_path / RELEASE).touch()
    assert done.wait(5)
    held.join()


def test_without_a_drill_every_moment_passes(tmp_path, monkeypatch) -> None:
    monkeypatch.delenv(HOLD_ENV, raising=False)
    began = time.monotonic()
    for moment in Moment:
        reached(moment, "t-0")
    assert time.monotonic() - began < 0.1 and not list(tmp_path.iterdir())
