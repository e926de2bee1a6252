"""The Docker engine, as the project uses it: is one there, and which containers are this process's.

Every container the project starts carries two labels: the id of the run that started it and the PID of the
process behind that run. testcontainers' Ryuk reaper, which would otherwise remove them, is an image no
registry here can deliver, so it is off: a broker container is stopped by the one who started it, and the
test session removes its run's containers, and those of runs whose process is gone, by these labels.
"""

from __future__ import annotations

import contextlib
import logging
import os
import uuid
from typing import Any, Iterator

log = logging.getLogger(__name__)

os.environ.setdefault("TESTCONTAINERS_RYUK_DISABLED", "true")  # read by testcontainers when it is imported

RUN_LABEL = "io.kcompact.run"
PID_LABEL = "io.kcompact.pid"
RUN_ID = uuid.uuid4().hex[:12]


class EngineMissing(RuntimeError):
    """No Docker engine answered."""


class DockerLibraryMissing(EngineMissing):
    """The Docker client library is not installed, so no engine can be asked."""


def run_labels() -> dict[str, str]:
    return {RUN_LABEL: RUN_ID, PID_LABEL: str(os.getpid())}


def client(timeout_s: float = 10.0) -> Any:
    """A client of the engine that answers a ping; raises EngineMissing otherwise."""
    try:
        import docker  # noqa: PLC0415 (the Docker path is optional: pip install 'kcompact[docker]')
    except ImportError:
        raise DockerLibraryMissing("the Docker client library is not installed (pip install 'kcompact[docker]')") \
            from None
    try:
        engine = docker.from_env(timeout=int(max(1, timeout_s)))
        engine.ping()
        return engine
    except Exception as exc:  # noqa: BLE001 (docker raises a zoo of connection errors; any of them means "no engine")
        raise EngineMissing(f"no Docker engine answered ({str(exc).splitlines()[0][:200]})") from None


@contextlib.contextmanager
def connected(timeout_s: float = 10.0) -> Iterator[Any]:
    """client(), closed when done."""
    engine = client(timeout_s)
    try:
        yield engine
    finally:
        engine.close()


def engine_answers(timeout_s: float = 2.0) -> bool:
    """Ask the engine itself (a ping), not just whether a client binary or socket exists."""
    try:
        client(timeout_s).close()
        return True
    except EngineMissing as exc:
        log.debug("%s", exc)
        return False
