"""Kafka's config-provider references, so that a secret lives in a file or the environment and never on a
command line: ``${file:/path/secrets.properties:sasl.password}`` (Kafka's FileConfigProvider: a key of a
.properties file), ``${dir:/path:name}`` (DirectoryConfigProvider: a file's content, as a mounted
Kubernetes secret holds it) and ``${env:VAR}`` (EnvVarConfigProvider).

A reference is kept as written wherever settings travel: the job's spec in Spark's task closures, the state
dir, the status output. It is resolved only where a value is used (a Kafka client is made, the Spark session
is configured), so a secret reaches an executor through the file the reference names, never through Spark.
The job resolves every reference once at start, so a missing file or key is one line before anything runs.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Mapping

from streaming.configuration import java_properties
from streaming.errors import UsageError

# Kafka's ConfigTransformer pattern: ${provider:[path:]key}
REFERENCE = re.compile(r"\$\{([^}]*?):(?:([^}]*?):)?([^}]*?)\}")
PROVIDERS = ("file", "dir", "env")


class UnresolvedReference(UsageError):
    """A reference that cannot be resolved; the message names the setting and the reference, never a value."""


def _resolve_one(setting: str, match: re.Match[str]) -> str:
    provider, path, key = match.group(1), match.group(2), match.group(3)
    where = f"{match.group(0)} (the value of {setting})"
    if provider == "env":
        if path is not None:
            raise UnresolvedReference(f"{where}: ${{env:VAR}} takes a variable's name only")
        if key not in os.environ:
            raise UnresolvedReference(f"{where}: the environment variable {key} is not set")
        return os.environ[key]
    if provider not in PROVIDERS:
        raise UnresolvedReference(f"{where}: unknown config provider {provider!r} (kcompact resolves "
                              f"{', '.join('${' + p + ':...}' for p in PROVIDERS)})")
    if path is None:
        raise UnresolvedReference(f"{where}: ${{{provider}:PATH:KEY}} needs a path and a key")
    target = Path(path) / key if provider == "dir" else Path(path)
    try:
        text = target.read_text(encoding="utf-8")
    except OSError as exc:
        raise UnresolvedReference(f"{where}: cannot read {target}: {exc.strerror or exc}") from None
    if provider == "dir":
        return text.rstrip("\n")
    values = java_properties.loads(text)
    if key not in values:
        raise UnresolvedReference(f"{where}: {path} has no key {key!r}")
    return values[key]


def resolve(setting: str, value: str) -> str:
    """The value with every reference in it replaced by what it names."""
    return REFERENCE.sub(lambda m: _resolve_one(setting, m), value)


def resolve_all(settings: Mapping[str, str]) -> dict[str, str]:
    return {k: resolve(k, v) if isinstance(v, str) and "${" in v else v for k, v in settings.items()}


def referenced(settings: Mapping[str, str]) -> set[str]:
    """The settings whose values are references: secrets by the user's own account."""
    return {k for k, v in settings.items() if isinstance(v, str) and REFERENCE.search(v)}
