"""`kcompact produce-changes`: a keyed change stream to try the compactor on (streaming.cli.demo writes it)."""

from __future__ import annotations

import argparse
import sys


def add_parsers(sub) -> None:
    p = sub.add_parser("produce-changes", help="produce a keyed change stream with versions and deletes")
    p.add_argument("--bootstrap-servers", required=True)
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
    from streaming.cli.demo import ChangeTopic, produce_changes  # noqa: PLC0415

    topic = ChangeTopic(args.topic, args.partitions, args.replication_factor, args.compact, args.keys)
    return produce_changes(args.bootstrap_servers, topic, args.count, args.interval, sys.stdout)
