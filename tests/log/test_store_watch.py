"""A store that stops answering is said while the job waits on it, and said again when it answers."""

from __future__ import annotations

import contextlib
import logging
import re
import threading
import time

import pyarrow.fs as pafs
import pytest

from streaming.log.arrow_storage import ArrowStorage
from streaming.log import store_watch
from streaming.log.store_watch import SAY_AFTER_S, WATCH, StoreUnanswered

WAITING = re.compile(r"waiting for the state store since \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC \(\d+s\): "
                     r"a read of bucket/log/m-1 has had no answer")


class _Stalled(pafs.FileSystemHandler):
    """A filesystem whose reads wait until released, as a store behind a partition does."""

    def __init__(self) -> None:
        self.released = threading.Event()

    def open_input_stream(self, path):
        self.released.wait(30)
        raise FileNotFoundError(path)

    def get_type_name(self): return "stalled"
    def normalize_path(self, path): return path
    def get_file_info(self, paths): return [pafs.FileInfo(p, pafs.FileType.NotFound) for p in paths]
    def get_file_info_selector(self, selector): return []
    def create_dir(self, path, recursive): pass
    def delete_dir(self, path): pass
    def delete_dir_contents(self, path, missing_dir_ok=False): pass
    def delete_root_dir_contents(self): pass
    def delete_file(self, path): pass
    def move(self, src, dest): pass
    def copy_file(self, src, dest): pass
    def open_input_file(self, path): raise FileNotFoundError(path)
    def open_output_stream(self, path, metadata): raise NotImplementedError
    def open_append_stream(self, path, metadata): raise NotImplementedError


def test_a_read_the_store_does_not_answer_is_said_with_since_when_and_its_end_too(caplog) -> None:
    handler = _Stalled()
    storage = ArrowStorage(pafs.PyFileSystem(handler), lambda path, data: True)
    reader = threading.Thread(target=lambda: _read_ignoring_errors(storage), daemon=True)
    with caplog.at_level(logging.WARNING, logger="streaming.log.store_watch"):
        reader.start()
        time.sleep(0.2)  # the read has begun and waits
        WATCH.check(time.monotonic() + SAY_AFTER_S + 1)
        said = [r.getMessage() for r in caplog.records]
        assert any(WAITING.search(line) for line in said), said
        handler.released.set()
        reader.join(10)
        WATCH.check(time.monotonic())
    lines = [r.getMessage() for r in caplog.records]
    assert lines[-1].startswith("the state store answers again, after "), lines


def test_a_call_that_answers_in_time_says_nothing(caplog) -> None:
    with caplog.at_level(logging.WARNING, logger="streaming.log.store_watch"), WATCH.call("a look at x"):
        WATCH.check(time.monotonic() + SAY_AFTER_S / 2)
    WATCH.check(time.monotonic())
    assert not caplog.records


def _read_ignoring_errors(storage: ArrowStorage) -> None:
    with contextlib.suppress(FileNotFoundError):  # the stalled filesystem has nothing to read once released
        storage.get("bucket/log/m-1")


def test_a_call_the_store_does_not_answer_is_tried_again_and_a_refusal_is_raised_at_once(monkeypatch) -> None:
    monkeypatch.setattr(store_watch, "FIRST_PAUSE_S", 0.01)
    attempts: list[int] = []

    def flaky() -> str:
        attempts.append(1)
        if len(attempts) < 4:
            raise StoreUnanswered("connection refused")
        return "answer"

    assert WATCH.answered("a look at x", flaky) == "answer" and len(attempts) == 4

    def refused() -> str:
        attempts.append(1)
        raise PermissionError("access denied")

    attempts.clear()
    with pytest.raises(PermissionError):
        WATCH.answered("a look at x", refused)
    assert len(attempts) == 1


class _Clock:
    """The watch's clock, moved only by the test: the watch's own thread checks every second, and on a real
    clock it could find a call between its start and its data moving and say it waits."""

    def __init__(self) -> None:
        self.now = time.monotonic()

    def monotonic(self) -> float:
        return self.now

    time_ns = staticmethod(time.time_ns)
    sleep = staticmethod(time.sleep)


def test_data_that_moves_keeps_a_long_call_quiet_until_one_of_its_attempts_goes_unanswered(caplog, monkeypatch) -> None:
    """A large upload takes long and is answered all along; an attempt that failed proves the store away, and
    data the next one hands to the client's buffers does not prove it back."""
    monkeypatch.setattr(store_watch, "FIRST_PAUSE_S", 0.01)
    clock = _Clock()
    monkeypatch.setattr(store_watch, "time", clock)

    def upload_for(seconds: float) -> None:
        clock.now += seconds
        WATCH.moved()
        WATCH.check(clock.now)

    def healthy() -> None:
        for _ in range(3):
            upload_for(0.6 * SAY_AFTER_S)

    failed: list[int] = []

    def after_a_failure() -> None:
        if not failed:
            failed.append(1)
            raise StoreUnanswered("connection refused")
        upload_for(1.5 * SAY_AFTER_S)

    with caplog.at_level(logging.WARNING, logger="streaming.log.store_watch"):
        WATCH.answered("a write of big", healthy)
        assert not caplog.records, [r.getMessage() for r in caplog.records]
        WATCH.answered("a write of big", after_a_failure)
        WATCH.check(clock.now)
    said = [r.getMessage() for r in caplog.records]
    assert said and said[0].startswith("waiting for the state store since") and "a write of big" in said[0], said
