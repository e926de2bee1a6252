"""A Spark standalone cluster on 127.0.0.1 for the tests: one master and its workers, each a JVM started
from the installed PySpark's own scripts, each stopped by its PID. Executors run in JVMs of their own that
the workers start, as on any cluster."""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from streaming.brokers.local.server import free_port
from streaming.spark.home import pyspark_dir

EXECUTOR = "CoarseGrainedExecutorBackend"
WORKER = "org.apache.spark.deploy.worker.Worker"


@dataclass
class StandaloneCluster:
    master_url: str
    work_dirs: list[Path]
    processes: list[subprocess.Popen] = field(default_factory=list)

    def executor_dirs(self) -> list[list[Path]]:
        """Per worker, the directories of the executors it started (app-*/<executor id>)."""
        return [sorted(p for p in d.glob("app-*/*") if p.is_dir()) for d in self.work_dirs]

    def executor_logs(self) -> list[str]:
        """Per worker, what its executors wrote to stderr (their Python workers' log lines among it)."""
        return ["".join((e / "stderr").read_text(errors="replace") for e in dirs if (e / "stderr").exists())
                for dirs in self.executor_dirs()]


def spark_script(name: str) -> str:
    return os.path.join(pyspark_dir(), "bin", name)


def _wait_for(path: Path, text: str, process: subprocess.Popen, timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while text not in (path.read_text(errors="replace") if path.exists() else ""):
        if process.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"{path.name}: {text!r} not seen; log tail:\n{path.read_text()[-3000:]}")
        time.sleep(0.25)


@contextlib.contextmanager
def standalone_cluster(root: Path, workers: int = 2, cores: int = 1, memory: str = "1g") -> Iterator[StandaloneCluster]:
    root.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "SPARK_HOME": pyspark_dir(), "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_NO_DAEMONIZE": "1"}
    port = free_port()
    cluster = StandaloneCluster(f"spark://127.0.0.1:{port}", [root / f"worker-{i}" for i in range(workers)])

    def start(name: str, *args: str) -> tuple[subprocess.Popen, Path]:
        log = root / f"{name}.log"
        with open(log, "w") as out:
            p = subprocess.Popen([spark_script("spark-class"), *args], stdout=out, stderr=subprocess.STDOUT, env=env)
        cluster.processes.append(p)
        return p, log

    try:
        master, log = start("master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                            "--port", str(port), "--webui-port", str(free_port()))
        _wait_for(log, "I have been elected leader", master)
        for i, work_dir in enumerate(cluster.work_dirs):
            work_dir.mkdir(parents=True)
            worker, log = start(f"worker-{i}", WORKER, cluster.master_url,
                                "--host", "127.0.0.1", "--cores", str(cores), "--memory", memory,
                                "--webui-port", str(free_port()), "--work-dir", str(work_dir))
            _wait_for(log, "Successfully registered with master", worker)
        yield cluster
    finally:
        for p in reversed(cluster.processes):
            p.terminate()
        for p in cluster.processes:
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(10)



def _parent(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def _command(pid: int) -> str:
    return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")


def process_tree(task_pid: int, root: str = EXECUTOR) -> list[int]:
    """The process above a task's Python worker whose command names ``root`` (its executor JVM, or the
    worker JVM that started that executor), and every process under it."""
    top = task_pid
    while root not in _command(top):
        top = _parent(top)
        assert top > 1, f"process {task_pid} runs under no {root}"
    tree, changed = {top}, True
    while changed:
        changed = False
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                pid, parent = int(stat.parent.name), _parent(int(stat.parent.name))
            except (OSError, ValueError, IndexError):  # gone meanwhile
                continue
            if parent in tree and pid not in tree:
                tree.add(pid)
                changed = True
    return sorted(tree)
