"""The sanitizer lane (scripts/test.sh --asan, and part of the whole run): the C extension built with
AddressSanitizer beside the installed one, and the tests of the native path run against that build, in one
process under the sanitizer's runtime (LD_PRELOAD) with Python's and Arrow's allocators off, so a read or write
past any buffer, Python's own objects and the batches librdkafka reads values from included, stops the run with
ASan's report.

The lane's broker is a local Apache Kafka started here, outside the sanitizer: a JVM does not run under it.
Run as ``python -m tests.asan_lane [pytest arguments]``; its exit status is pytest's."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
from pathlib import Path

from streaming.brokers.choice import start_local_broker
from tests.asan import ENV
from tests.processes import brokers_compile_lightly

ROOT = Path(__file__).resolve().parent.parent
# The native path's tests, all that run in this process (the whole job's test starts a JVM of its own)
TESTS = ["tests/kafka/native/test_rdkafka_columns.py", "tests/kafka/source/test_batch_fetch.py",
         "tests/kafka/sink/test_batch_produce.py", "tests/kafka/sink/test_held_buffers.py",
         "tests/kafka/native/test_native_paths.py",
         "tests/kafka/native/test_native.py", "tests/spark/source/test_kafka_source.py"]
SELECTION = ["-k", "not a_job_on"]
FLAGS = "-fsanitize=address -fno-omit-frame-pointer -g -O1"


def build(into: Path) -> str:
    """The extension built with ASan into ``into``; its path."""
    shutil.rmtree(into, ignore_errors=True)
    done = subprocess.run([sys.executable, "setup.py", "-q", "build_ext", "--build-lib", str(into / "lib"),
                           "--build-temp", str(into / "tmp")], cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, "CFLAGS": FLAGS, "LDFLAGS": "-fsanitize=address"})
    if done.returncode != 0:
        sys.exit(f"kcompact: building the extension with AddressSanitizer failed:\n{done.stdout}{done.stderr}")
    [built] = glob.glob(str(into / "lib/streaming/kafka/native/_rdkafka_columns*.so"))
    return built


def runtime() -> str:
    found = subprocess.run(["cc", "-print-file-name=libasan.so"], capture_output=True, text=True).stdout.strip()
    if not os.path.isabs(found):
        sys.exit("kcompact: the C compiler has no AddressSanitizer runtime (libasan.so); install libasan8")
    return found


def main(pytest_args: list[str]) -> int:
    built = build(Path(sys.prefix) / "asan")
    brokers_compile_lightly()
    broker = start_local_broker()
    try:
        # Arrow's buffers from malloc too: librdkafka reads values from them (no copy), and a read after their free
        # is reported only in memory the sanitizer tracks
        env = {**os.environ, ENV: built, "LD_PRELOAD": runtime(), "PYTHONMALLOC": "malloc",
               "ARROW_DEFAULT_MEMORY_POOL": "system",
               "ASAN_OPTIONS": "detect_leaks=0:abort_on_error=1", "KAFKA_BOOTSTRAP_SERVERS": broker.bootstrap_servers}
        print(f"kcompact: the native tests under AddressSanitizer ({built})", file=sys.stderr, flush=True)
        # --capture=sys: what ASan writes to the process's stderr reaches the terminal, not a capture lost in the abort
        return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:xdist", "-p", "tests.asan", "-q", "--capture=sys",
                               *SELECTION, *TESTS, *pytest_args], cwd=ROOT, env=env).returncode
    finally:
        broker.stop()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
