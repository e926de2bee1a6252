"""The compactor running continuously in a process of its own, as an operator runs it: the fault tests start
it, watch its own phase lines and the progress it writes, and stop it with SIGTERM."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Mapping

from tests.e2e.helpers import COMPACTED_SINK, JobProgress, descendants, wait_for

PHASE_LINE = re.compile(r"phase: (append|compaction stage|clean|emit|idle)")


class RunningJob:
    def __init__(self, bootstrap: str, source: str, sink: str, work: Path, *config: str,
                 trigger_interval_s: float = 0.5, extra: tuple[str, ...] = (), env: Mapping[str, str] = {},
                 state_dir: str | None = None, sink_config: list[str] = COMPACTED_SINK) -> None:
        self.state_dir = state_dir or str(work / "state")
        self.log_path = work / "job.log"
        self.command = [sys.executable, "-m", "streaming", "--log-level", "DEBUG", "run", "--bootstrap-servers",
                        bootstrap, "--source-topic", source, "--sink-topic", sink, "--state-dir", self.state_dir,
                        "--trigger-interval", str(trigger_interval_s), *sink_config, *extra]
        for c in config:
            self.command += ["--config", c]
        self.env = {**os.environ, **env}
        self.process: subprocess.Popen | None = None

    def __enter__(self) -> "RunningJob":
        with open(self.log_path, "w") as log:
            self.process = subprocess.Popen(self.command, stdout=log, stderr=subprocess.STDOUT, env=self.env)
        return self

    def __exit__(self, *exc) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def running(self) -> None:
        assert self.process.poll() is None, f"the compactor exited with {self.process.returncode}: {self.log()[-4000:]}"

    def source_planner(self) -> int | None:
        """The Python process Spark plans the source's micro-batches in (it asks Kafka for offsets)."""
        for pid in descendants(self.process.pid):
            try:
                if b"python_streaming_source_runner" in Path(f"/proc/{pid}/cmdline").read_bytes():
                    return pid
            except OSError:
                continue
        return None

    def progress(self) -> JobProgress:
        self.running()
        return JobProgress.of(self.state_dir)

    def progressed_beyond(self, mark: JobProgress, timeout_s: float = 240) -> JobProgress:
        """Wait until both ingest and emission moved on since ``mark``; the progress then."""
        def beyond() -> JobProgress | None:
            now = self.progress()
            return now if now.beyond(mark) else None
        return wait_for(beyond, timeout_s, "the job ingests and emits")

    def phase_begins(self, phase: str, timeout_s: float = 120) -> None:
        """Wait for the next line saying ``phase`` (append, clean, emit) begins."""
        seen = len(PHASE_LINE.findall(self.log()))

        def begun() -> bool:
            self.running()
            return phase in [p.split()[0] for p in PHASE_LINE.findall(self.log())[seen:]]
        wait_for(begun, timeout_s, f"the job begins to {phase}", pause_s=0.02)

    def stop(self, timeout_s: float = 120) -> None:
        """SIGTERM, as an operator stops it: it must end on its own, with exit status 0."""
        self.process.send_signal(signal.SIGTERM)
        assert self.process.wait(timeout_s) == 0, self.log()[-4000:]

    def interrupt(self, timeout_s: float = 30) -> tuple[int, float]:
        """Ctrl-C, as a person at the terminal stops it: (exit status, seconds it took)."""
        began = time.monotonic()
        self.process.send_signal(signal.SIGINT)
        try:
            code = self.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"Ctrl-C did not stop the job within {timeout_s:.0f}s: {self.log()[-4000:]}") from None
        return code, time.monotonic() - began

    def lines_since(self, offset: int) -> list[str]:
        return self.log()[offset:].splitlines()
