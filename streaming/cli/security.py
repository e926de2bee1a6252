"""A warning for a password typed on the command line, which every user of the host can read (ps)."""

from __future__ import annotations

import logging
from typing import Mapping, Sequence

from streaming.configuration import config_providers
from streaming.security.redaction import SECRET_KEY

log = logging.getLogger("kcompact")


def warn_secrets_on_command_line(pairs: Mapping[str, Sequence[str]]) -> None:
    """``pairs``: KEY=VALUE options by flag, as given on the command line (before any --config-file)."""
    for option, given in pairs.items():
        for pair in given:
            key, _, value = pair.partition("=")
            if SECRET_KEY.search(key) and value and not config_providers.REFERENCE.search(value):
                log.warning("%s %s is a secret on the command line, which every user of this host can read (ps); put "
                            "it in a file and give the reference ${file:/etc/kcompact/client.properties:%s}", option, key, key)
