"""PostgreSQL for the CDC tests: Debian's server binaries, one server per test session in a temporary
directory on a free port of 127.0.0.1, with logical decoding on (wal_level=logical) so Debezium's pgoutput
plugin can stream its changes. initdb and the server refuse to run as root, so a root session runs them as
the unprivileged `postgres` account the Debian package makes. The server is stopped by its PID."""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import psycopg

from streaming.brokers.local.server import LOCAL_HOST, die_with_parent, free_port
from tests.processes import stop, wait_answering

SUPERUSER = "kcompact"
DATABASE = "shop"
UNPRIVILEGED = "postgres"  # the account Debian's package makes


class PostgresError(RuntimeError):
    """PostgreSQL is missing or did not start; the message says why."""


def server_binaries() -> Path:
    """Where initdb and postgres are: on PATH, or in Debian's /usr/lib/postgresql/VERSION/bin."""
    found = shutil.which("initdb")
    if found:
        return Path(os.path.realpath(found)).parent
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4]))
    if not candidates:
        raise PostgresError("PostgreSQL's server is missing: the test set-up (scripts/test.sh) installs Debian's "
                            "postgresql-15 as root; otherwise install it")
    return Path(candidates[-1]).parent


def _run_as() -> str | None:
    if os.geteuid() != 0:
        return None
    try:
        pwd.getpwnam(UNPRIVILEGED)
    except KeyError:
        raise PostgresError(f"running as root, and there is no {UNPRIVILEGED!r} account to run PostgreSQL as") from None
    return UNPRIVILEGED


@dataclass
class Postgres:
    port: int
    directory: Path
    process: subprocess.Popen

    @property
    def dsn(self) -> str:
        return f"host={LOCAL_HOST} port={self.port} user={SUPERUSER} dbname={DATABASE}"

    def connect(self) -> psycopg.Connection:
        return psycopg.connect(self.dsn, autocommit=True)

    def stop(self) -> None:
        stop(self.process, 30.0)


def start_postgres(directory: Path) -> Postgres:
    binaries, user = server_binaries(), _run_as()
    directory.mkdir(parents=True, exist_ok=True)
    data, log = directory / "data", directory / "postgres.log"
    if user is not None:
        entry = pwd.getpwnam(user)
        for path in (directory, *directory.parents):
            if path == Path(path.anchor):
                break
            os.chmod(path, os.stat(path).st_mode | 0o011)  # the account must reach its directory
        os.chown(directory, entry.pw_uid, entry.pw_gid)
    done = subprocess.run([str(binaries / "initdb"), "-D", str(data), "-U", SUPERUSER, "--auth=trust",
                           "--encoding=UTF8", "--no-sync"], capture_output=True, text=True, user=user)
    if done.returncode != 0:
        raise PostgresError(f"initdb failed: {(done.stdout + done.stderr).strip()[-500:]}")
    port = free_port()
    settings = {"listen_addresses": LOCAL_HOST, "port": str(port), "unix_socket_directories": str(directory),
                "wal_level": "logical", "max_wal_senders": "8", "max_replication_slots": "8", "fsync": "off",
                "synchronous_commit": "off", "full_page_writes": "off", "timezone": "UTC"}
    args = [str(binaries / "postgres"), "-D", str(data)] + [a for k, v in settings.items() for a in ("-c", f"{k}={v}")]
    with open(log, "ab") as out:
        process = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, user=user, preexec_fn=die_with_parent)

    def create_database() -> None:
        with psycopg.connect(f"host={LOCAL_HOST} port={port} user={SUPERUSER} dbname=postgres", autocommit=True,
                             connect_timeout=2) as conn:
            conn.execute(f"CREATE DATABASE {DATABASE}")

    wait_answering(process, create_database, psycopg.OperationalError, 60, PostgresError,
                   f"PostgreSQL on port {port} (log: {log})")
    return Postgres(port, directory, process)
