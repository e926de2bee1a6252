"""Idle triggers' compaction stages run off the main thread (streaming.job.idle_stages), which only waits and so
hears Ctrl-C while a stage waits on a state store that does not answer."""

from __future__ import annotations

import threading

import pytest

from streaming.job.idle_stages import IdleStages
from tests.e2e.helpers import wait_for


def test_stages_run_off_the_main_thread_on_ticks_without_a_micro_batch() -> None:
    ran: list[threading.Thread] = []
    batches = [0]
    with IdleStages(lambda: ran.append(threading.current_thread()), lambda: batches[0], 0.01, threading.RLock()):
        wait_for(lambda: len(ran) >= 3, 10, "three idle stages", pause_s=0.01)
        batches[0] += 1  # a micro-batch ran: its own stage did the work
    assert threading.main_thread() not in ran


def test_no_stage_while_a_micro_batch_holds_the_lock() -> None:
    ran: list[int] = []
    lock = threading.RLock()
    with lock, IdleStages(lambda: ran.append(1), lambda: 0, 0.01, lock):
        threading.Event().wait(0.2)  # twenty ticks
        assert ran == []


def test_a_stage_that_failed_is_handed_to_the_main_thread() -> None:
    def full() -> None:
        raise OSError("no space left on device")
    with IdleStages(full, lambda: 0, 0.01, threading.RLock()) as idle:
        wait_for(lambda: idle.failure is not None, 10, "the stage's failure", pause_s=0.01)
    with pytest.raises(OSError, match="no space"):
        raise idle.failure
