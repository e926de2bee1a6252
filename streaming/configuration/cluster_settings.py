"""The two clusters' client settings: on one cluster the sink is reached as the source is, unless told otherwise."""

from __future__ import annotations

from typing import Mapping


def sink_settings(source: Mapping[str, str], sink: Mapping[str, str], same_cluster: bool) -> dict[str, str]:
    """The sink side's client settings: the source's under the sink's own where both are one cluster."""
    return {**source, **sink} if same_cluster else dict(sink)


def setting_origins(origins: Mapping[str, Mapping[str, str]], same_cluster: bool) -> tuple[dict[str, str],
                                                                                           dict[str, str]]:
    """The source's and the sink's client settings' origins in a config file (RunOptions.origins), merged as
    sink_settings merges the settings."""
    source = dict(origins.get("kafka", {}))
    return source, sink_settings(source, origins.get("sink.kafka", {}), same_cluster)
