"""A non-editable install (the Docker image's) carries everything the package reads at run time."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_a_wheel_holds_the_log_schema_and_the_kafka_pom_and_reads_them_installed(tmp_path: Path) -> None:
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w",
                    str(tmp_path / "dist"), str(ROOT)], check=True, capture_output=True, timeout=300)
    wheel = next((tmp_path / "dist").glob("kcompact-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    assert "streaming/log/log_record.avsc" in names and "streaming/brokers/local/pom.xml" in names
    target = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(target)
    probe = ("import streaming.log.record as r, streaming.brokers.local.jars as j; "
             "assert r.parsed_schema()['name']; print(r.SCHEMA_PATH); print(j.pinned_version())")
    out = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, env={"PYTHONPATH": str(target)},
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[0].startswith(str(target)), "read from the installed copy, not the tree"
