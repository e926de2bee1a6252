"""Spark settings that are secrets (by name, or given as a reference to a secret) are told to the JVM only once
it runs: a JVM's command line is read by every user of its host (ps)."""

from __future__ import annotations

from typing import Mapping

from streaming.configuration import config_providers
from streaming.security.redaction import SECRET_KEY


def spark_settings(conf: Mapping[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """--spark-conf and spark.* settings resolved, split into those the JVM may be launched with and those
    (secret by name or given as a reference) it is told only once it runs."""
    resolved = config_providers.resolve_all(conf)
    secret = config_providers.referenced(conf) | {k for k in conf if SECRET_KEY.search(k)}
    return ({k: v for k, v in resolved.items() if k not in secret},
            {k: v for k, v in resolved.items() if k in secret})
