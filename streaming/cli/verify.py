"""`kcompact verify`: each sink partition against the source's winner of every key, read from the source
topic itself (streaming.verify)."""

from __future__ import annotations

import argparse
import json

from streaming.security import redaction
from streaming.cli.pairs import parse_pairs, sink_settings
from streaming.cli.run import CONNECT_TIMEOUT_S
from streaming.configuration.subscription import subscription_of


def add_parsers(sub) -> None:
    p = sub.add_parser("verify", help="check that each sink partition holds the source's winner of every key, "
                                      "reading the source topic itself; exit 1 on a mismatch")
    p.add_argument("--bootstrap-servers", required=True, help="source cluster")
    p.add_argument("--source-topic", action="append", required=True, metavar="TOPIC",
                   help="a mirrored source topic (repeatable)")
    p.add_argument("--sink-topic", help="the sink topic, for one --source-topic")
    p.add_argument("--sink-topic-template", metavar="TEMPLATE", help="each source topic's sink, with {topic}")
    p.add_argument("--sink-bootstrap-servers", help="sink cluster (default: the source cluster)")
    p.add_argument("--config", action="append", default=[], metavar="KEY=VALUE",
                   help="compaction setting the job was given (compaction.strategy, compaction.strategy.header)")
    p.add_argument("--kafka", action="append", default=[], metavar="KEY=VALUE", help="librdkafka setting, source")
    p.add_argument("--sink-kafka", action="append", default=[], metavar="KEY=VALUE", help="librdkafka setting, sink")
    p.add_argument("--cluster-timeout", type=float, default=CONNECT_TIMEOUT_S, metavar="SECONDS",
                   help="how long to wait for a cluster to answer")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_cmd_verify)


def _cmd_verify(args: argparse.Namespace) -> int:
    from streaming.cleaner import Overrides  # noqa: PLC0415
    from streaming.job.topics import SinkNaming  # noqa: PLC0415
    from streaming.kafka.admin import Cluster  # noqa: PLC0415
    from streaming.verify.mirror import MirroredPair, verify_topic  # noqa: PLC0415

    subscription = subscription_of(args.source_topic, None, pattern_as="a pattern (verify takes topics by name)")
    naming = SinkNaming.of(args.sink_topic, args.sink_topic_template, subscription)
    overrides = Overrides.parse(parse_pairs(args.config, "--config"))
    source_kafka = parse_pairs(args.kafka, "--kafka")
    sink_kafka = sink_settings(source_kafka, parse_pairs(args.sink_kafka, "--sink-kafka"),
                               same_cluster=not args.sink_bootstrap_servers)
    redaction.register([source_kafka, sink_kafka])
    source = Cluster("source", args.bootstrap_servers, source_kafka, connect_timeout_s=args.cluster_timeout)
    sink = Cluster("sink", args.sink_bootstrap_servers or args.bootstrap_servers, sink_kafka,
                   connect_timeout_s=args.cluster_timeout)
    verdicts = []
    for topic in subscription.names:
        for verdict in verify_topic(source, sink, MirroredPair(topic, naming.sink_of(topic)), overrides):
            verdicts.append(verdict)
            if not args.json:
                print(verdict.line(), flush=True)
    failed = [v for v in verdicts if not v.ok]
    if args.json:
        print(json.dumps({"ok": not failed, "partitions": [v.to_doc() for v in verdicts]}, indent=2))
    else:
        print(f"{len(verdicts) - len(failed)} of {len(verdicts)} partitions verified"
              + (f"; {sum(v.mismatches for v in failed)} mismatches" if failed else ""))
    return 1 if failed else 0
