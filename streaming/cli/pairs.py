"""The repeatable KEY=VALUE options (--kafka, --sink-kafka, --config, ...) as settings."""

from __future__ import annotations

from typing import Mapping, Sequence

from streaming.errors import UsageError


def parse_pairs(pairs: Sequence[str], option: str) -> dict[str, str]:
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"{option} takes KEY=VALUE, got {pair!r}")
        out[key.strip()] = value
    return out


def sink_settings(source: Mapping[str, str], sink: Mapping[str, str], same_cluster: bool) -> dict[str, str]:
    """The sink side's client settings: on one cluster it is reached as the source is, unless told otherwise."""
    return {**source, **sink} if same_cluster else dict(sink)
