"""The Docker engine of a test session: reused when one answers; otherwise, as root on Debian, docker.io (with
mmdebstrap and docker-compose, which the images and the compose test need) is installed and dockerd started
as a child of this process, stopped by its PID when the session ends. An engine the session started is
never left running; one it found is left as it was. The session removes its run's containers when it ends,
and at its start those of runs whose process is gone (killed before it could clean up), by the labels every
container of the project carries (streaming.brokers.engine)."""

from __future__ import annotations

import logging
import os
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from streaming.brokers.engine import PID_LABEL, RUN_LABEL, engine_answers

log = logging.getLogger(__name__)

COMPOSE_PROJECT_LABEL = "com.docker.compose.project"

PACKAGES = {"dockerd": "docker.io", "mmdebstrap": "mmdebstrap", "docker-compose": "docker-compose"}
START_TIMEOUT_S = 60


@dataclass
class EngineSession:
    available: bool
    how: str  # one line for the session's summary: which engine, or why there is none
    process: subprocess.Popen | None = field(default=None, repr=False)
    run_dir: Path | None = None  # dockerd's pid file and log, removed with it

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)  # dockerd stops the containerd it started, then itself
            try:
                self.process.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(10)
        if self.run_dir is not None:
            shutil.rmtree(self.run_dir, ignore_errors=True)


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
                            process, run_dir)
    deadline = time.monotonic() + START_TIMEOUT_S
    while not engine_answers():
        if process.poll() is not None or time.monotonic() > deadline:
            tail = (run_dir / "dockerd.log").read_text(errors="replace")[-500:]
            session.stop()
            return EngineSession(False, f"dockerd did not come up: {tail}")
        time.sleep(0.5)
    return session


def _orphaned(pid: str) -> bool:
    """The process that started a container is gone (a container without a PID label is nobody's to remove)."""
    return pid.isdigit() and not os.path.exists(f"/proc/{pid}")


def remove_containers(engine: Any, run_id: str | None = None) -> int:
    """Remove this project's containers: the given run's, or (None) those whose starting process is gone.
    The compose networks and volumes of those containers go too. Returns how many containers were removed."""
    mine = engine.containers.list(all=True, filters={"label": RUN_LABEL})
    doomed = [c for c in mine if (c.labels.get(RUN_LABEL) == run_id if run_id is not None
                                  else _orphaned(c.labels.get(PID_LABEL, "")))]
    projects = {c.labels[COMPOSE_PROJECT_LABEL] for c in doomed if COMPOSE_PROJECT_LABEL in c.labels}
    for c in doomed:
        c.remove(force=True, v=True)
    for project in projects:
        for network in engine.networks.list(filters={"label": f"{COMPOSE_PROJECT_LABEL}={project}"}):
            network.remove()
        for volume in engine.volumes.list(filters={"label": f"{COMPOSE_PROJECT_LABEL}={project}"}):
            volume.remove(force=True)
    if doomed:
        log.info("removed %d containers %s", len(doomed),
                 f"of run {run_id}" if run_id else "left by runs whose process is gone")
    return len(doomed)
