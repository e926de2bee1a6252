#!/usr/bin/env bash
# README command (2): set everything up, then run the whole test suite.
# --fast: only the tests that need neither a broker nor a cluster (unit, property and command-line tests),
# a few minutes; --asan: only the native path's tests, with its C extension built under AddressSanitizer
# (tests/asan_lane.py), which the whole run also runs, beside the tests; docs/architecture.md says which lane to run when.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/bootstrap.sh"

# The whole run: the set-up that only some tests need is done beside the tests rather than before them: the
# builds and fetches in the background (a test that needs one before it is done waits for it,
# streaming.runtime.user_cache.filling), and the native path's lane under AddressSanitizer alongside the two
# workers. Each part runs in a process group of its own (setsid), so Ctrl-C or a TERM stops it whole. Each
# side's output is kept and shown when it failed; either failing fails the run.
_set_up_parts=()
_stop_set_up() {  # every part's process group, its children (go, mvn, the lane's pytest) too
    local pid
    for pid in "${_set_up_parts[@]}"; do
        kill -TERM -- "-$pid" 2>/dev/null || true
    done
}

_set_up_part() {  # pid, log, what it is: its end, its output shown when it failed
    if ! wait "$1"; then
        cat "$2" >&2
        echo "kcompact: $3 failed (its output above, also in $2)" >&2
        return 1
    fi
}

run_whole_suite() {
    local logs status=0 failed=0
    logs="$(mktemp -d "${TMPDIR:-/tmp}/kcompact-setup-XXXXXX")"
    # pytest, in the foreground, gets Ctrl-C itself and stops its workers and services; then the parts go
    trap '_stop_set_up; exit 130' INT
    trap '_stop_set_up; exit 143' TERM
    # Toxiproxy first (the cluster's proxies need it at the cluster side's first test), then MinIO, built with
    # Go at a low priority so the tests keep the CPU; Kafka Connect and Debezium are fetched with Maven meanwhile
    setsid bash -c 'nice -n 10 python -m tests.toxiproxy && nice -n 10 python -m tests.minio' >"$logs/go.log" 2>&1 &
    _set_up_parts+=($!)
    local go_builds=$!
    setsid python -m tests.cdc.connect >"$logs/connect.log" 2>&1 &
    _set_up_parts+=($!)
    local connect=$!
    setsid python -m tests.asan_lane >"$logs/asan.log" 2>&1 &
    _set_up_parts+=($!)
    local asan=$!
    python -m pytest -n 2 --dist loadgroup "$@" || status=$?
    if [[ "$status" == 2 || "$status" == 3 || "$status" == 4 ]]; then  # interrupted, internal or usage error
        _stop_set_up
        exit "$status"
    fi
    _set_up_part "$go_builds" "$logs/go.log" "the Go builds (Toxiproxy, MinIO)" || failed=1
    _set_up_part "$connect" "$logs/connect.log" "the fetch of Kafka Connect and Debezium" || failed=1
    if _set_up_part "$asan" "$logs/asan.log" "the native path's tests under AddressSanitizer"; then
        echo "--- the native path's tests under AddressSanitizer (tests/asan_lane.py)" >&2
        tail -n 3 "$logs/asan.log" >&2
    else
        failed=1
    fi
    if [[ "$status" == 0 && "$failed" == 0 ]]; then
        rm -rf "$logs"
    elif [[ "$status" == 0 ]]; then
        status=1
    fi
    exit "$status"
}
# The tests' temporary files (pytest's tmp_path; the brokers', the cluster's, MinIO's and PostgreSQL's data)
# live in memory when /dev/shm has room for them: a durable commit (write, fsync, rename, fsync of the
# directory) costs milliseconds on a VM's disk and microseconds there, and the suite makes a great many. The
# tests kill processes, never the machine, so a disk's durability is not what they check; bench/ keeps the disk.
# One directory, reused, so pytest's own retention (its last three runs) bounds what it holds. Only where
# /dev/shm has the room, the machine has the memory beside the brokers and JVMs (it holds no swap here), and
# scripts may run from it (some tests run theirs from tmp_path).
_temporary_files_in_memory() {
    local free_kib available_kib dir
    free_kib="$(df --output=avail -k /dev/shm 2>/dev/null | tail -n 1 | tr -d ' ')"
    available_kib="$(awk '/^MemAvailable:/ {print $2}' /proc/meminfo 2>/dev/null)"
    dir="/dev/shm/kcompact-tests-$(id -u)"
    [[ "$free_kib" =~ ^[0-9]+$ && "$available_kib" =~ ^[0-9]+$ ]] || return 0
    (( free_kib >= 8 * 1024 * 1024 && available_kib >= 16 * 1024 * 1024 )) || return 0
    findmnt -no OPTIONS /dev/shm 2>/dev/null | grep -qw noexec && return 0
    mkdir -p -m 700 "$dir" 2>/dev/null && [[ -O "$dir" ]] || return 0
    export TMPDIR="$dir"
}
cd "$KCOMPACT_ROOT"
_temporary_files_in_memory
python -m ruff check --quiet .  # the lint pyproject.toml configures; a finding fails the run
if [[ "${1:-}" == "--fast" ]]; then
    shift
    set -- -m "not slow and not integration" "$@"
elif [[ "${1:-}" == "--asan" ]]; then
    shift
    exec python -m tests.asan_lane "$@"
else
    ensure_postgres  # the CDC tests' database (Debian's postgresql-15)
    ensure_maven
    run_whole_suite "$@"
fi
exec python -m pytest -n 2 --dist loadgroup "$@"
