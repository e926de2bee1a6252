"""`kcompact verify`: each sink partition against the source's winner of every key, read from the source
topic itself (streaming.verify).

What to check comes from the job itself where it can: --state-dir reads the saved job (both clusters, the
topics and their sinks, each topic's strategy as the job resolved it, the client settings as saved, secrets
as the references the job was given), and --config-file reads the run's own file. Flags win over both."""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass, field
from typing import Any, Mapping

from streaming.cli.pairs import parse_pairs
from streaming.configuration.cluster_settings import setting_origins, sink_settings
from streaming.job.options import CONNECT_TIMEOUT_S
from streaming.errors import UsageError
from streaming.security import redaction
from streaming.security.redaction import REDACTED


def add_parsers(sub) -> None:
    p = sub.add_parser("verify", help="check that each sink partition holds the source's winner of every key, "
                                      "reading the source topic itself, and how far the sink has got; exit 1 on a "
                                      "mismatch")
    p.add_argument("--state-dir", help="the job's state dir: its clusters, topics, strategy and client settings "
                                       "(secrets given to the job as values are not kept: give them again)")
    p.add_argument("--config-file", metavar="FILE", help="the run's --config-file: bootstrap.servers, "
                                                         "source.topic, sink.topic, kafka.*, sink.kafka.*, ...")
    p.add_argument("--bootstrap-servers", help="source cluster")
    p.add_argument("--source-topic", action="append", metavar="TOPIC",
                   help="a mirrored source topic (repeatable; default: every topic the job mirrors)")
    p.add_argument("--topic", action="append", default=None, metavar="NAME_OR_REGEX",
                   help="only these of the topics: a name, or a regular expression matched whole (repeatable)")
    p.add_argument("--sink-topic", help="the sink topic, for one --source-topic")
    p.add_argument("--sink-topic-template", metavar="TEMPLATE", help="each source topic's sink, with {topic}")
    p.add_argument("--sink-bootstrap-servers", help="sink cluster (default: the source cluster)")
    p.add_argument("--config", action="append", default=[], metavar="KEY=VALUE",
                   help="compaction setting the job was given (compaction.strategy, compaction.strategy.header)")
    p.add_argument("--kafka", action="append", default=[], metavar="KEY=VALUE", help="librdkafka setting, source")
    p.add_argument("--sink-kafka", action="append", default=[], metavar="KEY=VALUE", help="librdkafka setting, sink")
    p.add_argument("--cluster-timeout", type=float, default=CONNECT_TIMEOUT_S, metavar="SECONDS",
                   help="how long to wait for a cluster to answer")
    p.add_argument("--json", action="store_true", help="every partition's verdict, as JSON")
    p.set_defaults(func=_cmd_verify)


SHOWN = 50  # verdict lines a person reads; past this, the failed and the behind, and --json for every one


@dataclass
class _Side:
    """One cluster as verify reaches it, merged from the saved job, the config file and the flags."""

    bootstrap: str | None = None
    kafka: dict[str, str] = field(default_factory=dict)
    origins: dict[str, str] = field(default_factory=dict)


def _cmd_verify(args: argparse.Namespace) -> int:
    from streaming.cleaner import Overrides  # noqa: PLC0415
    from streaming.cli import config_file  # noqa: PLC0415
    from streaming.configuration.subscription import select_topics, subscription_of  # noqa: PLC0415
    from streaming.job.topics import SinkNaming  # noqa: PLC0415
    from streaming.kafka.admin import Cluster  # noqa: PLC0415
    from streaming.verify.mirror import MirroredPair, verify_topic  # noqa: PLC0415

    from_file = config_file.read(args.config_file) if args.config_file else {}
    state_dir = args.state_dir or from_file.get("state.dir")
    saved = _saved(state_dir) if state_dir else None
    source, sink = _sides(args, from_file, saved, config_file.origins(args.config_file, from_file)
                          if args.config_file else {})
    overrides = Overrides.parse({**from_file.get("config", {}), **parse_pairs(args.config, "--config")})
    topics = tuple(args.source_topic or from_file.get("source.topic", ()) or (sorted(saved.topics) if saved else ()))
    if not topics:
        raise UsageError("say which topics: --source-topic, source.topic in --config-file, or --state-dir")
    if args.topic:
        topics = tuple(select_topics(topics, args.topic, "among the topics to verify"))
    sink_topic = args.sink_topic or from_file.get("sink.topic")
    template = args.sink_topic_template or from_file.get("sink.topic.template")
    subscription = subscription_of(list(topics), None, pattern_as="a pattern (verify takes topics by name)")
    naming = None if saved and not (sink_topic or template) else SinkNaming.of(sink_topic, template, subscription)
    plans = {} if saved is None else saved.topics
    missing = [t for t in topics if naming is None and t not in plans]
    if missing:
        raise UsageError(f"topic {missing[0]!r} is not mirrored by the job of {state_dir}; it mirrors "
                         f"{', '.join(sorted(plans)) or 'nothing yet'}")
    clusters = {}
    for role, side in (("source", source), ("sink", sink)):
        redaction.register([side.kafka])
        clusters[role] = Cluster(role, side.bootstrap, side.kafka, connect_timeout_s=args.cluster_timeout,
                                 origins=side.origins)
    verdicts = []
    for topic in topics:
        pair = MirroredPair(topic, naming.sink_of(topic) if naming else plans[topic].sink)
        config = plans[topic].compaction if topic in plans and not args.config else None
        verdicts += verify_topic(clusters["source"], clusters["sink"], pair, overrides, config)
    failed = [v for v in verdicts if not v.ok]
    behind = [v for v in verdicts if v.ok and v.behind]
    if args.json:
        print(json.dumps({"ok": not failed, "behind": bool(behind), "partitions": [v.to_doc() for v in verdicts]},
                         indent=2))
        return 1 if failed else 0
    print(_summary(verdicts, failed, behind))
    shown = verdicts if len(verdicts) <= SHOWN else [*failed, *behind]
    for verdict in shown[:SHOWN]:
        print(verdict.line())
    if len(verdicts) > min(len(shown), SHOWN):
        print(f"({len(verdicts) - min(len(shown), SHOWN)} more partitions not shown"
              f"{': every other is ok and caught up' if len(shown) <= SHOWN else ''}; --topic narrows, --json lists "
              f"every one)")
    return 1 if failed else 0



def _summary(verdicts, failed, behind) -> str:
    line = f"{len(verdicts) - len(failed)} of {len(verdicts)} partitions verified"
    if failed:
        line += f"; {sum(v.mismatches for v in failed)} mismatches"
    if behind:
        line += (f"; {len(behind)} behind their source by {sum(v.owed for v in behind):,} winners in all, checked "
                 f"only up to what each sink holds")
    else:
        line += "; every sink caught up with its source"
    return line


def _saved(state_dir: str):
    from streaming.job.spec import load_saved  # noqa: PLC0415
    from streaming.state.stores import open_state_dir  # noqa: PLC0415

    return load_saved(open_state_dir(state_dir))


def _sides(args: argparse.Namespace, from_file: Mapping[str, Any], saved, file_origins) -> tuple[_Side, _Side]:
    """Flags over the config file over the saved job, key by key for the client settings."""
    source_origins, sink_origins = setting_origins(file_origins, same_cluster=True)
    source = _Side(args.bootstrap_servers or from_file.get("bootstrap.servers")
                   or (saved.mapping.source_bootstrap if saved else None))
    if source.bootstrap is None:
        raise UsageError("say where the source is: --bootstrap-servers, bootstrap.servers in --config-file, or "
                         "--state-dir")
    sink_bootstrap = (args.sink_bootstrap_servers or from_file.get("sink.bootstrap.servers")
                      or (saved.mapping.sink_bootstrap if saved else None))
    one_cluster = sink_bootstrap in (None, source.bootstrap)
    source_flags = parse_pairs(args.kafka, "--kafka")
    sink_flags = parse_pairs(args.sink_kafka, "--sink-kafka")
    source.kafka = {**(saved.source_kafka if saved else {}), **from_file.get("kafka", {}), **source_flags}
    source.origins = {k: v for k, v in source_origins.items() if k not in source_flags}
    sink = _Side(sink_bootstrap or source.bootstrap)
    sink.kafka = sink_settings(source.kafka, {**(saved.sink_kafka if saved else {}), **from_file.get("sink.kafka", {}),
                                              **sink_flags}, one_cluster)
    sink.origins = {k: v for k, v in (sink_origins if one_cluster else file_origins.get("sink.kafka", {})).items()
                    if k not in sink_flags}
    for role, side, flag in (("source", source, "--kafka"), ("sink", sink, "--sink-kafka")):
        lost = sorted(k for k, v in side.kafka.items() if v == REDACTED)
        if lost:
            raise UsageError(f"the job was given {', '.join(lost)} for the {role} cluster as a value, which the "
                             f"state dir does not keep: give it with {flag} {lost[0]}=${{file:PATH:{lost[0]}}} or in "
                             f"--config-file")
    return source, sink
