"""A cluster that does not answer at start is said to be awaited after a few seconds, not only when the wait
ends: one WARNING line naming it, then the one error line when the wait runs out."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from streaming.brokers.local.server import free_port
from tests.cli.test_first_contact import kcompact, lines, run_args

pytestmark = pytest.mark.integration


def test_a_sink_cluster_that_is_down_at_start_is_said_to_be_awaited_after_5s(bootstrap_servers: str, new_topic,
                                                                              tmp_path: Path) -> None:
    down = f"127.0.0.1:{free_port()}"
    started = time.monotonic()
    out = kcompact(*run_args(bootstrap_servers, new_topic(), "s", tmp_path / "state", "--sink-bootstrap-servers",
                             down, "--retry-timeout", "8"), timeout=120)
    took = time.monotonic() - started
    err = lines(out.stderr)
    assert out.returncode == 2 and len(err) == 2, out.stderr
    assert f" WARNING streaming.kafka.admin: waiting for the sink cluster at {down} to answer (up to 8s)" in err[0]
    assert re.search(r"; since \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC$", err[0]), "since when, as every wait says"
    assert err[1].startswith(f"kcompact: error: the sink cluster at {down} did not answer within 8s")
    assert 8 <= took < 30, took
    assert not (tmp_path / "state").exists()
