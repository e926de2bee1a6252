"""`kcompact produce-changes`: a keyed change stream to try the compactor on (streaming.cli.demo writes it)."""

from __future__ import annotations

import argparse
import sys

from streaming.cli.pairs import parse_pairs
from streaming.errors import UsageError
from streaming.security import redaction


def add_parsers(sub) -> None:
    p = sub.add_parser("produce-changes", help="produce a keyed change stream with versions and deletes")
    p.add_argument("--bootstrap-servers", help="the cluster (or bootstrap.servers in --config-file)")
    p.add_argument("--config-file", metavar="FILE",
                   help="a run's --config-file: its bootstrap.servers and kafka.* settings reach the cluster")
    p.add_argument("--kafka", action="append", default=[], metavar="KEY=VALUE",
                   help="librdkafka setting (repeatable), e.g. security.protocol=SASL_SSL; wins over the file's")
    p.add_argument("--topic", required=True)
    p.add_argument("--count", type=int, default=0, help="how many changes (default 0: until interrupted)")
    p.add_argument("--interval", type=float, default=0.0, metavar="SECONDS", help="pause between changes")
    p.add_argument("--partitions", type=int, default=3, help="partitions when the topic is created")
    p.add_argument("--replication-factor", type=int, default=-1,
                   help="replicas when the topic is created (default: the cluster's default.replication.factor)")
    p.add_argument("--compact", action="store_true", help="create the topic with cleanup.policy=compact")
    p.add_argument("--keys", type=int, default=20, help="distinct keys the changes are spread over")
    p.set_defaults(func=_cmd_produce_changes)


def _cmd_produce_changes(args: argparse.Namespace) -> int:
    from streaming.cli import config_file  # noqa: PLC0415
    from streaming.cli.demo import ChangeTopic, produce_changes  # noqa: PLC0415
    from streaming.kafka.admin import Cluster  # noqa: PLC0415

    topic = ChangeTopic(args.topic, args.partitions, args.replication_factor, args.compact, args.keys)
    from_file = config_file.read(args.config_file) if args.config_file else {}
    bootstrap = args.bootstrap_servers or from_file.get("bootstrap.servers")
    if not bootstrap:
        raise UsageError("--bootstrap-servers is required (or bootstrap.servers in --config-file)")
    flags = parse_pairs(args.kafka, "--kafka")
    settings = {**from_file.get("kafka", {}), **flags}
    origins = config_file.origins(args.config_file, from_file).get("kafka", {}) if args.config_file else {}
    redaction.register([settings])
    cluster = Cluster("source", bootstrap, settings, origins={k: v for k, v in origins.items() if k not in flags})
    return produce_changes(cluster, topic, args.count, args.interval, sys.stdout)
