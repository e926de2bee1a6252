"""The Docker engine of a test session: reused when one answers; otherwise, as root on Debian, docker.io (with
mmdebstrap and docker-compose, which the images and the compose test need) is installed and dockerd started
as a child of this process, stopped by its PID when the session ends. An engine the session started is
never left running; one it found is left as it was."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from streaming.brokers.engine import engine_answers

PACKAGES = {"dockerd": "docker.io", "mmdebstrap": "mmdebstrap", "docker-compose": "docker-compose"}
START_TIMEOUT_S = 60


@dataclass
class EngineSession:
    available: bool
    how: str  # one line for the session's summary: which engine, or why there is none
    process: subprocess.Popen | None = field(default=None, repr=False)

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)  # dockerd stops the containerd it started, then itself
        try:
            self.process.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(10)


def _install(missing: list[str]) -> str | None:
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for step in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", "--no-install-recommends", *missing]):
        done = subprocess.run(step, capture_output=True, text=True, env=env)
        if done.returncode != 0:
            return f"{' '.join(step[:2])} failed: {(done.stdout + done.stderr).strip()[-300:]}"
    return None


def start_engine() -> EngineSession:
    running = engine_answers()
    can_install = os.geteuid() == 0 and Path("/etc/debian_version").exists()
    if not running and not can_install:
        return EngineSession(False, "no Docker engine, and not root on Debian to install and start one")
    missing = sorted({pkg for tool, pkg in PACKAGES.items() if shutil.which(tool) is None
                      and not (running and tool == "dockerd")})
    if missing and can_install:
        failure = _install(missing)
        if failure and not running:
            return EngineSession(False, f"installing {' '.join(missing)} failed: {failure}")
    if running:
        return EngineSession(True, "a running Docker engine (reused, left running)")
    run_dir = Path(tempfile.mkdtemp(prefix="kcompact-dockerd-"))
    with open(run_dir / "dockerd.log", "wb") as out:
        process = subprocess.Popen(["dockerd", "--pidfile", str(run_dir / "dockerd.pid")], stdout=out,
                                   stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
    session = EngineSession(True, f"dockerd pid {process.pid}, started for this session (log {run_dir}/dockerd.log)",
                            process)
    deadline = time.monotonic() + START_TIMEOUT_S
    while not engine_answers():
        if process.poll() is not None or time.monotonic() > deadline:
            session.stop()
            tail = (run_dir / "dockerd.log").read_text(errors="replace")[-500:]
            return EngineSession(False, f"dockerd did not come up: {tail}")
        time.sleep(0.5)
    return session
