"""A broker the project found or started for the demo, the tests and `kcompact broker`, and how to give it back."""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Callable

from streaming.brokers.local import LocalKafka
from streaming.brokers.local.cluster import LocalCluster
from streaming.brokers.properties import ADMIN_USER, SCRAM_MECHANISM
from streaming.security.certificates import Certificates, write_private
from streaming.configuration import java_properties
from streaming.configuration.client_properties import java_client_properties
from streaming.errors import UserError
from streaming.kafka.access.acls import upsert_scram_user


class BrokerKind(str, Enum):
    EXTERNAL = "external"
    CONTAINER = "container"
    LOCAL = "local"


class BrokerError(UserError, RuntimeError):
    """The broker could not be reached or started; the message says which and why."""


@dataclass(frozen=True)
class SecureAccess:
    """The secured listeners of a broker the project started, and what a client needs on each: SCRAM-SHA-512
    over TLS (SASL_SSL), and TLS with a client certificate (SSL, mTLS). ``admin_password`` is the SCRAM super
    user's (properties.ADMIN_USER)."""

    ssl_bootstrap_servers: str
    sasl_ssl_bootstrap_servers: str
    certificates: Certificates
    admin_password: str

    def scram(self, user: str, password: str) -> dict[str, str]:
        """librdkafka settings for a SCRAM login over TLS (bootstrap.servers: sasl_ssl_bootstrap_servers)."""
        return {"security.protocol": "SASL_SSL", "sasl.mechanism": SCRAM_MECHANISM, "sasl.username": user,
                "sasl.password": password, **self.certificates.client_settings()}

    def admin(self) -> dict[str, str]:
        return self.scram(ADMIN_USER, self.admin_password)

    def mtls(self) -> dict[str, str]:
        """librdkafka settings for the client certificate (bootstrap.servers: ssl_bootstrap_servers)."""
        return {"security.protocol": "SSL", **self.certificates.client_settings(mutual=True)}

    def write_client_files(self) -> ClientFiles:
        """Beside the certificates: the admin's password, a `kcompact run --config-file` for each secured
        listener, whose password is a reference to that file (never the password itself), and the admin's
        client properties in Java's form, for kafka-acls.sh --command-config and kcompact's --admin-config."""
        d = self.certificates.dir
        files = ClientFiles(d / PASSWORDS_FILE, d / SCRAM_CONFIG_FILE, d / MTLS_CONFIG_FILE, d / ADMIN_COMMAND_FILE)
        write_private(files.passwords, java_properties.dumps({ADMIN_USER: self.admin_password}).encode())
        write_private(files.admin_command, java_properties.dumps(
            {"bootstrap.servers": self.sasl_ssl_bootstrap_servers, **java_client_properties(self.admin())}).encode())
        scram = {**self.admin(), "sasl.password": f"${{file:{files.passwords}:{ADMIN_USER}}}"}
        self._write_config_file(files.scram_config, self.sasl_ssl_bootstrap_servers, scram)
        self._write_config_file(files.mtls_config, self.ssl_bootstrap_servers, self.mtls())
        return files

    def write_user(self, setup_bootstrap_servers: str, user: str) -> UserFiles:
        """A SCRAM user made now with a new password, kept in a file of its own (0600), and a `kcompact run
        --config-file` that logs in as it by reference to that file. It holds no ACL: grant what it needs."""
        password = secrets.token_urlsafe(18)
        upsert_scram_user(setup_bootstrap_servers, user, password)
        d = self.certificates.dir
        files = UserFiles(user, d / f"{user}.password.properties", d / f"{user}-sasl-ssl.properties")
        write_private(files.password, java_properties.dumps({"sasl.password": password}).encode())
        self._write_config_file(files.config, self.sasl_ssl_bootstrap_servers,
                                self.scram(user, f"${{file:{files.password}:sasl.password}}"))
        return files

    @staticmethod
    def _write_config_file(path: Path, bootstrap: str, settings: dict[str, str]) -> None:
        write_private(path, java_properties.dumps(
            {"bootstrap.servers": bootstrap, **{f"kafka.{k}": v for k, v in settings.items()}}).encode())


PASSWORDS_FILE = "passwords.properties"
SCRAM_CONFIG_FILE = "admin-sasl-ssl.properties"
MTLS_CONFIG_FILE = "client-mtls.properties"
ADMIN_COMMAND_FILE = "admin-command.properties"


@dataclass(frozen=True)
class ClientFiles:
    passwords: Path
    scram_config: Path
    mtls_config: Path
    admin_command: Path  # Java's form, password included (0600): for Kafka's tools and --admin-config


@dataclass(frozen=True)
class UserFiles:
    user: str
    password: Path  # sasl.password=..., 0600
    config: Path  # a kcompact --config-file logging in as the user


def secure_access(bootstrap_servers: str, ssl: str, sasl_ssl: str, certificates: Certificates) -> SecureAccess:
    """The secured listeners of a broker that answers, once its SCRAM super user has a new password."""
    password = secrets.token_urlsafe(18)
    upsert_scram_user(bootstrap_servers, ADMIN_USER, password)
    return SecureAccess(ssl, sasl_ssl, certificates, password)


@dataclass
class Broker:
    """A reachable broker. ``server`` is the process of a local broker and ``cluster`` the nodes of a local
    cluster (which tests may kill and start again); ``sasl_bootstrap_servers`` a SASL_PLAINTEXT listener
    taking the given users' PLAIN logins, if known; ``secure`` the TLS listeners of a broker we started."""

    bootstrap_servers: str
    kind: BrokerKind
    _stop: Callable[[], None] = field(default=lambda: None, repr=False)
    sasl_bootstrap_servers: str | None = None
    server: LocalKafka | None = field(default=None, repr=False)
    cluster: LocalCluster | None = field(default=None, repr=False)
    secure: SecureAccess | None = field(default=None, repr=False)

    @property
    def pid(self) -> int | None:
        """The local broker's current process (a restarted one has a new pid); None for one we did not start."""
        return self.server.pid if self.server is not None else None

    def stop(self) -> None:
        self._stop()
        self._stop = lambda: None

    def __enter__(self) -> "Broker":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()
