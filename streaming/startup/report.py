"""What a start says before the job's first stage: the effective configuration, topics with the same one together,
and a warning where Kafka's defaults would hold records back from the sink for days."""

from __future__ import annotations

import logging
import sys
from typing import Mapping

from streaming.job.spec import TOPIC_SCOPES, JobSpec
from streaming.names import names_text
from streaming.readable import bytes_text, duration_text
from streaming.security import redaction

log = logging.getLogger("kcompact")

LATE_FIRST_EMISSION_MS = 3_600_000  # a continuous run warns when records may wait longer than this for the sink


def print_plans(spec: JobSpec, source_kafka: Mapping[str, str], sink_kafka: Mapping[str, str]) -> None:
    """The effective configuration, topics with the same one together: the most common in full, each other
    by what it sets differently, so a whole cluster's start fits a screen (each topic's at DEBUG)."""
    def side(bootstrap: str, settings: Mapping[str, str]) -> str:
        return f"{bootstrap} {redaction.redact(settings)}" if settings else bootstrap

    groups: dict[tuple, list[str]] = {}
    for topic, plan in sorted(spec.topics.items()):
        config = plan.compaction.to_kafka(TOPIC_SCOPES)
        log.debug("%s (%d partitions) -> %s; effective configuration: %s", topic, plan.partitions, plan.sink,
                  ", ".join(f"{k}={v}" for k, v in config.items()))
        groups.setdefault(tuple(config.items()), []).append(topic)
    partitions = sum(p.partitions for p in spec.topics.values())
    print(f"mirroring {len(spec.topics)} topic(s) ({partitions:,} partitions) from "
          f"{side(spec.source_bootstrap, source_kafka)} to {side(spec.sink_bootstrap, sink_kafka)}; "
          f"{', '.join(f'{k}={v}' for k, v in spec.settings.to_kafka().items())}")
    ordered = sorted(groups.items(), key=lambda g: (-len(g[1]), g[1][0]))
    for i, (config, topics) in enumerate(ordered):
        plan = spec.topics[topics[0]]
        where = f"{topics[0]} ({plan.partitions} partitions) -> {plan.sink}" if len(topics) == 1 else \
            f"{len(topics)} topics ({names_text(topics)}) -> {spec.mapping.sink_template}"
        if i == 0:
            print(f"  {where}; effective configuration:")
            for key, value in config:
                print(f"    {key}={value}")
        else:
            first = dict(ordered[0][0])
            print(f"  {where}; as above but " + ", ".join(f"{k}={v}" for k, v in config if first.get(k) != v))
    sys.stdout.flush()


def warn_of_late_first_emission(spec: JobSpec) -> None:
    """Kafka's defaults hold every record in its active segment for a week: a mirror for disaster recovery
    that emits nothing for days should say so at start, not leave it to the manual; once for all the topics
    that hold records alike."""
    late: dict[tuple, list[str]] = {}
    for topic, plan in sorted(spec.topics.items()):
        c = plan.compaction
        if c.longest_hold_ms > LATE_FIRST_EMISSION_MS:
            alike = (c.longest_hold_ms, c.segment_ms, c.max_compaction_lag_ms, c.segment_bytes)
            late.setdefault(alike, []).append(topic)
    for (hold, segment_ms, max_lag, segment_bytes), topics in late.items():
        who = f"{topics[0]}: records reach {spec.topics[topics[0]].sink}" if len(topics) == 1 else \
            f"{len(topics)} topics ({names_text(topics)}): records reach their sinks"
        log.warning("%s only once their segment is cleaned: up to %s after they arrive (segment.ms=%s, "
                    "max.compaction.lag.ms=%s) unless %s of them fill segment.bytes first; set "
                    "max.compaction.lag.ms to bound it, e.g. --config max.compaction.lag.ms=60000", who,
                    duration_text(hold), duration_text(segment_ms), duration_text(max_lag), bytes_text(segment_bytes))
