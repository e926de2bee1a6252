"""The commands that read a job's state dir: `kcompact status`, `dump` and `erasures` (the erase audit).

Their logic lives in cli.status, cli.dump and cli.erasures, imported when the command runs: `--help` loads
none of it."""

from __future__ import annotations

import argparse
import json
import time

from streaming.security import redaction
from streaming.cli.pairs import parse_pairs
from streaming.configuration.cluster_settings import sink_settings


TOPIC_HELP = "only these source topics: a name, or a regular expression matched whole (repeatable)"


def add_parsers(sub) -> None:
    p = sub.add_parser("status", help="per-partition log and cleaner state, and the cleaner's metrics")
    p.add_argument("--state-dir", required=True)
    p.add_argument("--topic", action="append", default=None, help=TOPIC_HELP)
    p.add_argument("--json", action="store_true", help="every partition, as JSON")
    p.set_defaults(func=_cmd_status)

    p = sub.add_parser("dump", help="print the records of the compactor's logs")
    p.add_argument("--state-dir", required=True)
    p.add_argument("--topic", default=None, help="only this source topic's logs")
    p.add_argument("--partition", type=int, default=None)
    p.add_argument("--format", choices=["jsonl", "table"], default="jsonl")
    p.set_defaults(func=_cmd_dump)

    p = sub.add_parser("erasures", help="the erase audit: when each tombstone's key left the compactor's log "
                                        "and reached the sink")
    p.add_argument("--state-dir", required=True)
    p.add_argument("--topic", action="append", default=None, help=TOPIC_HELP)
    which = p.add_mutually_exclusive_group()
    which.add_argument("--key", default=None, help="only this key's tombstones (as text; found by its SHA-256 "
                                                   "with erase.audit.keys=hash)")
    which.add_argument("--since", default=None, metavar="TIME",
                       help="only tombstones stamped at or after TIME (ISO 8601, UTC unless given, or ms since "
                            "the epoch)")
    p.add_argument("--overdue", action="store_true",
                   help="only erasures past max.compaction.lag.ms plus one trigger whose key's earlier records are "
                        "still in the log or that are not in the sink; exit status 1 if there are any")
    p.add_argument("--json", action="store_true")
    p.add_argument("--kafka", action="append", default=[], metavar="KEY=VALUE",
                   help="librdkafka setting to reach the source, for its topic's retention")
    p.add_argument("--sink-kafka", action="append", default=[], metavar="KEY=VALUE",
                   help="librdkafka setting to reach the sink, for its topic's compaction settings")
    p.add_argument("--cluster-timeout", type=float, default=5.0, metavar="SECONDS",
                   help="how long to wait for each cluster's topic settings (default 5)")
    p.set_defaults(func=_cmd_erasures)


def _cmd_status(args: argparse.Namespace) -> int:
    from streaming.cli.status import collect_status, render_table  # noqa: PLC0415

    status = collect_status(args.state_dir, int(time.time() * 1000), args.topic)
    print(json.dumps(status.to_doc(), indent=2) if args.json else render_table(status))
    return 0


def _cmd_dump(args: argparse.Namespace) -> int:
    from streaming.cli.dump import TABLE_HEADER, dump_records, render_jsonl, render_row  # noqa: PLC0415

    records = dump_records(args.state_dir, args.partition, args.topic)
    if args.format == "table":
        print(TABLE_HEADER)
    render = render_jsonl if args.format == "jsonl" else render_row
    for rec in records:
        print(render(rec))
    return 0


def _cmd_erasures(args: argparse.Namespace) -> int:
    from streaming.cli.erasures import (SINK_KEYS, SOURCE_KEYS, Query, collect_erasures, outside_notes,  # noqa: PLC0415
                                        parse_since, render_table)
    from streaming.kafka.admin import Cluster  # noqa: PLC0415

    source_kafka = parse_pairs(args.kafka, "--kafka")
    query = Query(tuple(args.topic) if args.topic else None, args.key, None if args.since is None else parse_since(args.since), args.overdue)
    found, saved = collect_erasures(args.state_dir, query, int(time.time() * 1000))
    sink_kafka = sink_settings(source_kafka, parse_pairs(args.sink_kafka, "--sink-kafka"), saved.mapping.one_cluster)
    redaction.register([source_kafka, sink_kafka])
    source = Cluster("source", saved.mapping.source_bootstrap, source_kafka, connect_timeout_s=args.cluster_timeout)
    sink = Cluster("sink", saved.mapping.sink_bootstrap, sink_kafka, connect_timeout_s=args.cluster_timeout)

    def configs(cluster: Cluster, topics: list[str], keys: tuple[str, ...]) -> dict[str, dict[str, str] | str]:
        try:
            return cluster.topic_configs_of(topics, keys)
        except Exception as exc:  # noqa: BLE001 (the audit stands without it; the line says what is missing)
            return dict.fromkeys(topics, str(exc).splitlines()[0])

    listed = sorted({item.entry.topic for item in found.listed})  # what bounds the erasures listed
    plans = {t: saved.topics[t] for t in listed}
    of_source = configs(source, listed, SOURCE_KEYS)
    of_sink = configs(sink, [p.sink for p in plans.values()], SINK_KEYS)
    for topic, plan in plans.items():
        found.outside += outside_notes(of_source[topic], of_sink[plan.sink], topic, plan.sink)
    print(json.dumps(found.to_doc(), indent=2) if args.json else render_table(found))
    return 1 if args.overdue and found.overdue else 0
