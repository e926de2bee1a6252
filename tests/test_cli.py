"""The console command, `python -m streaming`, and the demo the README's first command runs."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from streaming.broker import BOOTSTRAP_ENV
from streaming.cli import build_parser
from streaming.demo import DEMO_RECORDS


def test_module_and_console_script_are_the_same_program() -> None:
    via_module = subprocess.run([sys.executable, "-m", "streaming", "--help"], capture_output=True, text=True)
    via_script = subprocess.run([os.path.join(os.path.dirname(sys.executable), "kcompact"), "--help"],
                                capture_output=True, text=True)
    assert via_module.returncode == 0 and via_script.returncode == 0
    assert via_module.stdout == via_script.stdout
    assert "broker" in via_module.stdout and "demo" in via_module.stdout


def test_unknown_subcommand_is_rejected_by_name() -> None:
    with pytest.raises(SystemExit) as exc:
        build_parser().parse_args(["no-such-command"])
    assert exc.value.code == 2


@pytest.mark.integration
def test_demo_prints_records_and_tombstone(bootstrap_servers: str) -> None:
    env = {**os.environ, BOOTSTRAP_ENV: bootstrap_servers}
    out = subprocess.run([sys.executable, "-m", "streaming", "demo"], capture_output=True, text=True,
                         env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    assert f"read back {len(DEMO_RECORDS)} records, 1 tombstone(s)" in out.stdout
    assert "null (tombstone)" in out.stdout
    assert "broker: external cluster" in out.stderr
