"""The native path's tests against every confluent-kafka release streaming.kafka.native.gate lists as tested (or those
named), each installed on its own into ~/.cache/kcompact/confluent-kafka/VERSION and put ahead of the
virtualenv's copy; one local broker serves them all. A new release is tried by adding it to TESTED (the gate
lets nothing else reach the extension) and naming it here; it stays only if this passes.

Run as ``python -m tests.client_versions [VERSION ...]``; exits non-zero if any release fails."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from streaming.brokers.choice import start_local_broker
from streaming.kafka.native.gate import TESTED
from streaming.runtime.user_cache import cache_root

ROOT = Path(__file__).resolve().parent.parent
TESTS = ["tests/kafka/native/test_rdkafka_columns.py", "tests/kafka/source/test_batch_fetch.py",
         "tests/kafka/sink/test_batch_produce.py", "tests/kafka/native/test_native_paths.py",
         "tests/kafka/native/test_native.py", "tests/spark/source/test_kafka_source.py"]


def installed(version: str) -> Path:
    target = cache_root() / "confluent-kafka" / version
    if not (target / "confluent_kafka").is_dir():
        done = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target),
                               f"confluent-kafka=={version}"], capture_output=True, text=True)
        if done.returncode != 0:
            sys.exit(f"kcompact: pip could not install confluent-kafka=={version}: {done.stderr.strip()[-500:]}")
    return target


def main(versions: list[str]) -> int:
    failed = []
    with start_local_broker() as broker:
        for version in versions or sorted(TESTED):
            env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(installed(version)), str(ROOT)]),
                   "KAFKA_BOOTSTRAP_SERVERS": broker.bootstrap_servers}
            print(f"kcompact: confluent-kafka {version}", file=sys.stderr, flush=True)
            done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:xdist", "-q", "-k", "not a_job_on", *TESTS],
                                  cwd=ROOT, env=env)
            if done.returncode != 0:
                failed.append(version)
    print(f"kcompact: {len(failed)} of {len(versions or TESTED)} releases failed {failed or ''}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
