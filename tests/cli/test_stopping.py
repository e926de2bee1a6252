"""A run stopped as service managers stop it: SIGTERM to the whole process group (systemd's default
KillMode, `timeout`, a container's init) reaches the driver, which finishes its batch and exits 0; Spark's
JVM, which ignores SIGTERM, ends with the driver instead of dying under it mid-call."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.cli.test_first_contact import KCOMPACT, TEXT_LINE, lines, produce_keyed, run_args

pytestmark = pytest.mark.integration


def _group_members(pgid: int) -> list[int]:
    members = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            members.append(int(stat.parent.name))
    return members


def test_sigterm_to_the_process_group_stops_the_run_after_its_batch_and_leaves_no_process(
        bootstrap_servers: str, new_topic, tmp_path: Path) -> None:
    src = new_topic(partitions=2)
    produce_keyed(bootstrap_servers, src, [(b"k%d" % (i % 20), b"v%d" % i) for i in range(400)], 2)
    err_path = tmp_path / "err"
    with open(err_path, "w") as err:
        job = subprocess.Popen([*KCOMPACT, *run_args(bootstrap_servers, src, f"{src}.c", tmp_path / "state",
                                                     "--trigger-interval", "1")],
                               stdout=subprocess.DEVNULL, stderr=err, start_new_session=True)
        deadline = time.monotonic() + 180
        while " batch 0: 2 partitions, 400 records appended" not in err_path.read_text():
            assert job.poll() is None and time.monotonic() < deadline, err_path.read_text()
            time.sleep(0.2)
        os.killpg(job.pid, signal.SIGTERM)
        code = job.wait(120)
    said = lines(err_path.read_text())
    assert code == 0, said
    assert all(TEXT_LINE.match(line) for line in said), said
    assert " INFO streaming.job.runner: stopped: 400 records ingested" in said[-1], said
    deadline = time.monotonic() + 30
    while _group_members(job.pid) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not _group_members(job.pid), "Spark's JVM and its Python workers end with the driver"
