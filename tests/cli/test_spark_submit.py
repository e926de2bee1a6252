"""`kcompact submit` stops as `kcompact run` does: SIGTERM to it reaches the job's driver, which finishes the
batch in flight and exits 0 with its `stopped:` line, rather than spark-submit's JVM ending under it."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.cli.test_first_contact import KCOMPACT, TEXT_LINE, lines, produce_keyed

pytestmark = pytest.mark.integration


def test_sigterm_to_kcompact_submit_stops_the_job_after_its_batch_with_exit_0(bootstrap_servers: str, new_topic,
                                                                              tmp_path: Path) -> None:
    src = new_topic(partitions=2)
    produce_keyed(bootstrap_servers, src, [(b"k%d" % (i % 20), b"v%d" % i) for i in range(400)], 2)
    err_path = tmp_path / "err"
    with open(err_path, "w") as err:
        job = subprocess.Popen([*KCOMPACT, "submit", "--master", "local[2]", "run", "--bootstrap-servers",
                                bootstrap_servers, "--source-topic", src, "--sink-topic", f"{src}.c", "--state-dir",
                                str(tmp_path / "state"), "--trigger-interval", "1"],
                               stdout=subprocess.DEVNULL, stderr=err)
        deadline = time.monotonic() + 180
        while " batch 0: 2 partitions, 400 records appended" not in err_path.read_text():
            assert job.poll() is None and time.monotonic() < deadline, err_path.read_text()
            time.sleep(0.2)
        job.send_signal(signal.SIGTERM)
        code = job.wait(120)
    said = lines(err_path.read_text())
    assert code == 0, said
    assert all(TEXT_LINE.match(line) for line in said), said
    assert " INFO streaming.job.runner: stopped: 400 records ingested" in said[-1], said
