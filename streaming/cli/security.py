"""What the command line does to keep secrets and mirrored data private: spark.* secrets kept off the
JVM's command line, a warning for a password typed on the command line, and one for a state dir that
other users can read."""

from __future__ import annotations

import logging
import os
import stat
from typing import Mapping, Sequence

from streaming.configuration import config_providers
from streaming.security.redaction import SECRET_KEY

log = logging.getLogger("kcompact")


def spark_settings(conf: Mapping[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """--spark-conf and spark.* settings resolved, split into those the JVM may be launched with and those
    (secret by name or given as a reference) it is told only once it runs."""
    resolved = config_providers.resolve_all(conf)
    secret = config_providers.referenced(conf) | {k for k in conf if SECRET_KEY.search(k)}
    return ({k: v for k, v in resolved.items() if k not in secret},
            {k: v for k, v in resolved.items() if k in secret})


def warn_secrets_on_command_line(pairs: Mapping[str, Sequence[str]]) -> None:
    """``pairs``: KEY=VALUE options by flag, as given on the command line (before any --config-file)."""
    for option, given in pairs.items():
        for pair in given:
            key, _, value = pair.partition("=")
            if SECRET_KEY.search(key) and value and not config_providers.REFERENCE.search(value):
                log.warning("%s %s is a secret on the command line, which every user of this host can read (ps); put "
                            "it in a file and give the reference ${file:/etc/kcompact/client.properties:%s}", option, key, key)


def warn_if_readable_by_others(path: str | None, option: str) -> None:
    """A local dir of the job's that exists and lets others in: it holds a copy of the mirrored data."""
    if path is None or "://" in path or not os.path.isdir(path):
        return
    mode = stat.S_IMODE(os.stat(path).st_mode)
    if mode & 0o077:
        log.warning("%s %s can be read by other users (mode %o): it holds a copy of the mirrored data; "
                    "chmod -R go-rwx %s", option, path, mode, path)
