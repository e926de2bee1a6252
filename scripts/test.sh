#!/usr/bin/env bash
# README command (2): set everything up, then run the whole test suite.
# --fast: only the tests that need neither a broker nor a cluster (unit, property and command-line tests),
# a few minutes; --asan: only the native path's tests, with its C extension built under AddressSanitizer
# (tests/asan_lane.py), which the whole run also runs first; docs/architecture.md says which lane to run when.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/bootstrap.sh"
cd "$KCOMPACT_ROOT"
python -m ruff check --quiet .  # the lint pyproject.toml configures; a finding fails the run
if [[ "${1:-}" == "--fast" ]]; then
    shift
    set -- -m "not slow and not integration" "$@"
elif [[ "${1:-}" == "--asan" ]]; then
    shift
    exec python -m tests.asan_lane "$@"
else
    python -m tests.asan_lane  # the native path under AddressSanitizer: a finding fails the run
    python -m tests.toxiproxy >&2  # the network-fault tests' proxy, built once into ~/.cache/kcompact with Go
    python -m tests.minio >&2      # the object-store tests' S3 server, built once the same way
    ensure_postgres                # the CDC tests' database (Debian's postgresql-15)
    ensure_maven
    python -m tests.cdc.connect >&2  # Kafka Connect and Debezium's connector, fetched once with Maven
fi
# Two workers: one holds the session's broker, Docker engine and SparkSession, the other the three-node
# cluster, and the tests that need neither go to whichever is free (tests/workers.py)
exec python -m pytest -n 2 --dist loadgroup "$@"
