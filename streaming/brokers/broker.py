"""A broker the project found or started for the demo, the tests and `kcompact broker`, and how to give it back."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Callable

from streaming.brokers.local import LocalKafka
from streaming.brokers.local.cluster import LocalCluster
from streaming.errors import UserError


class BrokerKind(str, Enum):
    EXTERNAL = "external"
    CONTAINER = "container"
    LOCAL = "local"


class BrokerError(UserError, RuntimeError):
    """The broker could not be reached or started; the message says which and why."""


@dataclass
class Broker:
    """A reachable broker. ``server`` is the process of a local broker and ``cluster`` the nodes of a local
    cluster (which tests may kill and start again); ``sasl_bootstrap_servers`` a SASL_PLAINTEXT listener
    taking the given users' PLAIN logins, if known."""

    bootstrap_servers: str
    kind: BrokerKind
    _stop: Callable[[], None] = field(default=lambda: None, repr=False)
    sasl_bootstrap_servers: str | None = None
    server: LocalKafka | None = field(default=None, repr=False)
    cluster: LocalCluster | None = field(default=None, repr=False)

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
