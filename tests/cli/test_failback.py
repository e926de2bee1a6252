"""`kcompact failback` checks its reverse state dir before it reads either cluster or settles anything."""

from __future__ import annotations

import subprocess
import sys

from streaming.cleaner import CompactionConfig
from streaming.configuration.subscription import Subscribe
from streaming.disaster.mark import mark, switched
from streaming.disaster.report import Switch, SwitchReport
from streaming.job.spec import JobMapping, JobSpec, TopicPlan
from streaming.state.stores import open_state_dir

KCOMPACT = [sys.executable, "-m", "streaming"]
AT_MS = 1_795_000_000_000


def test_a_reverse_state_dir_switched_away_from_is_refused_in_one_line_even_in_a_dry_run(tmp_path) -> None:
    job, reverse = open_state_dir(str(tmp_path / "job")), open_state_dir(str(tmp_path / "reverse"))
    mapping = JobMapping("127.0.0.1:1", Subscribe(("orders",)), "127.0.0.1:2", "{topic}")
    plan = TopicPlan("orders", "orders", CompactionConfig.from_mapping({}), 1)
    JobSpec(mapping, job.uri, {"orders": plan}, source_cluster_id="primary", sink_cluster_id="dr").save(job)
    mark(job, SwitchReport(Switch.FAILOVER, AT_MS, False, False, ()))
    mark(reverse, SwitchReport(Switch.PROMOTE, AT_MS, False, True, ()))
    out = subprocess.run([*KCOMPACT, "failback", "--state-dir", job.uri, "--reverse-state-dir", reverse.uri,
                          "--diverged", "keep", "--export-file", str(tmp_path / "tail.jsonl"),
                          "--dry-run"], capture_output=True, text=True, timeout=120)
    assert out.returncode != 0 and out.stdout == ""
    assert len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert f"the job of {reverse.uri} was promoted at" in out.stderr
    assert switched(reverse) is not None, "a dry run clears no mark"
