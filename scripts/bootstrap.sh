#!/usr/bin/env bash
# Sourced by demo.sh and test.sh: installs what a fresh machine lacks, and nothing twice.
#   - Java 17+ (Spark's JVM and the local Kafka broker's) and Maven via apt when missing and we are root;
#   - a virtualenv at .venv (or $KCOMPACT_VENV) holding this package with its test extras,
#     reinstalled only when pyproject.toml, setup.py or the C extension's source changed since the last install;
#   - a C compiler and Python's headers (apt, when missing and we are root), for that C extension;
#   - the pinned Apache Kafka jars (streaming/brokers/local/pom.xml), fetched with Maven into
#     ~/.cache/kcompact, for the local broker used when no cluster is given and no Docker engine answers.
set -euo pipefail

KCOMPACT_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
KCOMPACT_VENV="${KCOMPACT_VENV:-$KCOMPACT_ROOT/.venv}"

_java_major() {
    java -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -n1
}

ensure_java() {
    if command -v java >/dev/null 2>&1 && [ "$(_java_major)" -ge 17 ] 2>/dev/null; then
        return
    fi
    if [ "$(id -u)" != "0" ]; then
        echo "kcompact: Java 17 or newer is required (Spark's JVM); install openjdk-17-jre-headless" >&2
        exit 1
    fi
    _apt_install openjdk-17-jre-headless
}

_apt_install() {
    echo "kcompact: installing $* with apt-get" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

ensure_compiler() {
    # The source's batch fetch is a C extension (setup.py), built when the package is installed.
    local headers
    headers="$("$(_pick_python)" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')"
    if command -v cc >/dev/null 2>&1 && [ -f "$headers/Python.h" ]; then
        return
    fi
    if [ "$(id -u)" != "0" ]; then
        echo "kcompact: building the package needs a C compiler and Python's headers; install gcc and python3.11-dev" >&2
        exit 1
    fi
    _apt_install gcc libc6-dev python3.11-dev
}

ensure_maven() {
    if command -v mvn >/dev/null 2>&1; then
        return
    fi
    if [ "$(id -u)" != "0" ]; then
        echo "kcompact: Maven (mvn) is required to fetch Apache Kafka for the local broker; install maven" >&2
        exit 1
    fi
    _apt_install maven
}

ensure_postgres() {
    # The CDC tests run PostgreSQL's server from Debian's package (tests/cdc/postgres.py finds it).
    if command -v initdb >/dev/null 2>&1 || compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null; then
        return
    fi
    if [ "$(id -u)" != "0" ]; then
        echo "kcompact: the CDC tests need PostgreSQL's server; install postgresql-15" >&2
        exit 1
    fi
    _apt_install postgresql-15
}

ensure_kafka() {
    # Only a machine that will start the local broker needs its jars.
    if [ -n "${KAFKA_BOOTSTRAP_SERVERS:-}" ]; then
        return
    fi
    ensure_maven
    "$KCOMPACT_VENV/bin/python" -m streaming.brokers.local >&2
}

_pick_python() {
    for candidate in "${PYTHON:-}" python3.11 python3; do
        if [ -n "$candidate" ] && command -v "$candidate" >/dev/null 2>&1 \
            && "$candidate" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))'; then
            echo "$candidate"
            return
        fi
    done
    echo "kcompact: Python 3.11 is required (set PYTHON=/path/to/python3.11)" >&2
    exit 1
}

ensure_venv() {
    if [ ! -x "$KCOMPACT_VENV/bin/python" ]; then
        "$(_pick_python)" -m venv "$KCOMPACT_VENV"
    fi
    local stamp="$KCOMPACT_VENV/.kcompact-installed"
    local want
    want="$(find "$KCOMPACT_ROOT/streaming" -name '*.c' -print0 | sort -z |
            xargs -0 cat "$KCOMPACT_ROOT/pyproject.toml" "$KCOMPACT_ROOT/setup.py" | sha256sum | cut -d' ' -f1)"
    if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
        echo "kcompact: installing the package and its dependencies into $KCOMPACT_VENV" >&2
        # pip's and the build backend's own output (warnings included) is kept, and shown only if it fails
        local log="$KCOMPACT_VENV/kcompact-install.log"
        if ! { "$KCOMPACT_VENV/bin/python" -m pip install -q --upgrade pip &&
               "$KCOMPACT_VENV/bin/python" -m pip install -q -e "$KCOMPACT_ROOT[test]"; } >"$log" 2>&1; then
            cat "$log" >&2
            echo "kcompact: installing into $KCOMPACT_VENV failed (pip's output above, also in $log)" >&2
            exit 1
        fi
        echo "$want" > "$stamp"
    fi
}

ensure_java
ensure_compiler
ensure_venv
ensure_kafka
export PATH="$KCOMPACT_VENV/bin:$PATH"
