"""The settings every Kafka client kcompact makes starts from: connections at once, and librdkafka's log
through Python logging (streaming.kafka.client_log).

librdkafka connects to a broker only when a request needs it (enable.sparse.connections, on by default), and
a new client's first request then waits on its retry timers (bench/README.md). kcompact's clients ask at
once (a source task's consumer its log start, an emitter its coordinator and its progress, the planning
process its metadata), often on the path every record waits for, so they connect when they are made. A
user's setting wins.

Config-provider references (``${file:...}``, ``${env:...}``) are resolved here, where every client is made,
and what they name is masked in this process's logs from then on (streaming.configuration.config_providers says why).
"""

from __future__ import annotations

import difflib
import os
from dataclasses import dataclass
from typing import Mapping

from streaming.configuration import config_providers
from streaming.security import redaction
from streaming.kafka.native import librdkafka_build
from streaming.kafka.client_log import with_client_log

SPARSE_CONNECTIONS = "enable.sparse.connections"
FILE_SETTINGS = ("ssl.ca.location", "ssl.certificate.location", "ssl.key.location", "ssl.keystore.location",
                 "ssl.crl.location")
DEFAULT_SASL_MECHANISM = "GSSAPI"  # librdkafka's, which its wheels are built without (no Kerberos)


def client_settings(settings: Mapping[str, object], refusals_reported: bool = False) -> dict[str, object]:
    resolved = config_providers.resolve_all(settings)
    redaction.register_values(resolved[k] for k in config_providers.referenced(settings))
    return with_client_log({SPARSE_CONNECTIONS: "false", **resolved}, refusals_reported)


@dataclass(frozen=True)
class Refusal:
    """Why librdkafka refused to make a client, and the setting that is about (None: librdkafka did not say)."""

    why: str
    key: str | None = None


def refused_because(settings: Mapping[str, object]) -> Refusal | None:
    """Why librdkafka refused to make a client, when the settings themselves show it: a key it does not
    know (with the nearest one it does), or SASL with a mechanism this build lacks; None when they do not,
    and librdkafka's own message is the one to give."""
    known = librdkafka_build.properties()
    for key, value in settings.items():
        if known and key not in known and not callable(value):
            nearest = difflib.get_close_matches(key, known, n=1)
            return Refusal(f"{key!r} is not a librdkafka setting" + (f" (did you mean {nearest[0]}?)" if nearest
                                                                      else ""), key)
    for key in FILE_SETTINGS:
        path = settings.get(key)
        if isinstance(path, str) and path not in ("", "probe") and not os.path.exists(path):
            return Refusal(f"{key} {path}: no such file or directory", key)
    protocol = str(settings.get("security.protocol", "")).upper()
    given = settings.get("sasl.mechanism", settings.get("sasl.mechanisms"))
    mechanism = str(given or DEFAULT_SASL_MECHANISM).upper()
    built = librdkafka_build.sasl_mechanisms()
    if protocol.startswith("SASL") and built and mechanism not in built:
        which = f"sasl.mechanism={mechanism}" if given else f"no sasl.mechanism (librdkafka's default is {mechanism})"
        return Refusal(f"security.protocol={protocol} with {which}, which this librdkafka build does not support; "
                       f"set sasl.mechanism to one it does: {', '.join(built)}",
                       "sasl.mechanism" if "sasl.mechanism" in settings else "security.protocol")
    return None
