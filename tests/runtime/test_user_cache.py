"""The per-user cache: an entry being filled by one process is waited for by another, never filled twice."""

from __future__ import annotations

import multiprocessing
import time
from pathlib import Path

from streaming.runtime.user_cache import filling


def _fill_slowly(target: str, started, log: str) -> None:
    with filling(Path(target)):
        started.set()
        time.sleep(1.0)
        Path(target).mkdir(parents=True)
        with open(log, "a") as f:
            f.write("filled\n")


def test_a_process_wanting_an_entry_another_is_filling_waits_for_it(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    target, log = tmp_path / "entries" / "tool-1.0", tmp_path / "log"
    started = multiprocessing.get_context("fork").Event()
    filler = multiprocessing.get_context("fork").Process(target=_fill_slowly, args=(str(target), started, str(log)))
    filler.start()
    try:
        assert started.wait(30)
        with filling(target):
            assert target.is_dir(), "the second found the entry the first filled, having waited for it"
            assert log.read_text() == "filled\n"
    finally:
        filler.join(30)
    assert filler.exitcode == 0
    assert list(target.parent.iterdir()) == [target], "the entries' directory holds the entry and nothing else"
