"""A job's processes as /proc shows them, for the benchmarks that measure a whole job: its process tree, each
process's command line, its memory and the CPU it uses."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections import defaultdict


def tree(root: int) -> list[int]:
    """The process and all its descendants (the job's JVM, Spark's Python daemon and workers)."""
    children: dict[int, list[int]] = defaultdict(list)
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    children[int(f.read().rsplit(")", 1)[1].split()[1])].append(int(entry))
            except OSError:
                continue
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo += children.get(pid, [])
    return out


def cmdline(pid: int) -> str | None:
    """The command line, its arguments joined by spaces; None for a process that is gone."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return None


def is_jvm(pid: int) -> bool:
    cmd = cmdline(pid)
    return cmd is not None and "java" in cmd.split(" ", 1)[0]


def memory_mib(pid: int, field: str) -> float:
    """A memory figure in MiB: VmRSS from status, or Pss from smaps_rollup (a forked worker's pages shared
    with its daemon counted once over both); 0 for a process that is gone."""
    path = f"/proc/{pid}/status" if field.startswith("Vm") else f"/proc/{pid}/smaps_rollup"
    try:
        with open(path) as f:
            return next(int(line.split()[1]) for line in f if line.startswith(f"{field}:")) / 1024
    except (OSError, StopIteration):
        return 0.0


def cpu_s(pid: int | None) -> float:
    """CPU seconds a process has used so far (0 for one we cannot see: a broker we did not start)."""
    if pid is None:
        return 0.0
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cpu_over(root: int, seconds: float) -> float:
    """CPU seconds the process tree uses over the next ``seconds``, sampled four times a second: Spark retires
    idle Python workers and starts new ones, so a process that exits counts what it used up to its last
    sample."""
    def now() -> dict[int, float]:
        found = {}
        for pid in tree(root):
            try:
                found[pid] = cpu_s(pid)
            except OSError:
                continue
        return found

    first = now()
    last = dict(first)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        time.sleep(0.25)
        for pid, used in now().items():
            first.setdefault(pid, 0.0)
            last[pid] = used
    return sum(last[p] - first[p] for p in last)


def stop_group(proc: subprocess.Popen, grace_s: float) -> None:
    """Stops a process started in a session of its own, with its children (Spark's JVM and Python workers): SIGTERM
    to its group, SIGKILL if it has not ended within ``grace_s``. A group whose leader has ended may still hold
    children, so the signals go even then."""
    for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 30)):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(wait_s)
            return
