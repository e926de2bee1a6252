"""The settings every Kafka client kcompact makes starts from: connections at once, and librdkafka's log
through Python logging (streaming.kafka.client_log).

librdkafka connects to a broker only when a request needs it (enable.sparse.connections, on by default), and
a new client's first request then waits on its retry timers (bench/README.md). kcompact's clients ask at
once (a source task's consumer its log start, an emitter its coordinator and its progress, the planning
process its metadata), often on the path every record waits for, so they connect when they are made. A
user's setting wins.

Config-provider references (``${file:...}``, ``${env:...}``) are resolved here, where every client is made,
and what they name is masked in this process's logs from then on (streaming.config_providers says why).
"""

from __future__ import annotations

from typing import Mapping

from streaming import config_providers, redaction
from streaming.kafka.client_log import with_client_log

SPARSE_CONNECTIONS = "enable.sparse.connections"


def client_settings(settings: Mapping[str, object], refusals_reported: bool = False) -> dict[str, object]:
    resolved = config_providers.resolve_all(settings)
    redaction.register_values(resolved[k] for k in config_providers.referenced(settings))
    return with_client_log({SPARSE_CONNECTIONS: "false", **resolved}, refusals_reported)
