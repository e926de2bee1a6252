"""A helper process a test session starts (an S3 server, Toxiproxy, PostgreSQL, Kafka Connect): waited for
until it answers, and stopped by its PID, politely first."""

from __future__ import annotations

import os
import subprocess
import time
from typing import Callable, TypeVar

from streaming.brokers.local.server import KAFKA_OPTS

T = TypeVar("T")


def brokers_compile_lightly() -> None:
    """The JVMs of the brokers and the Connect worker a test run starts compile with C1 alone (KAFKA_OPTS,
    unless set): they live minutes and carry little load, and C1 alone starts a node on about 60% of the CPU
    and idles it on about 65%, where the suite is CPU-bound."""
    os.environ.setdefault(KAFKA_OPTS, "-XX:TieredStopAtLevel=1")


def wait_answering(process: subprocess.Popen, ask: Callable[[], T], refused: type[BaseException] | tuple,
                   timeout_s: float, error: Callable[[str], Exception], what: str, pause_s: float = 0.2) -> T:
    """What ``ask`` returns once it no longer raises ``refused``. The process exiting first, or no answer
    within ``timeout_s``, stops it and raises ``error`` with a line naming ``what`` (the service, and where
    its log is)."""
    deadline = time.monotonic() + timeout_s
    while True:
        if process.poll() is not None:
            raise error(f"{what} exited with {process.returncode} while starting")
        try:
            return ask()
        except refused:
            if time.monotonic() > deadline:
                stop(process)
                raise error(f"{what} did not answer within {timeout_s:g} s") from None
            time.sleep(pause_s)


def stop(process: subprocess.Popen, grace_s: float = 10.0) -> None:
    """SIGTERM, and SIGKILL if it has not gone within ``grace_s``."""
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(grace_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(grace_s)
