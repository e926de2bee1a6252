"""Moving consumers to the sink by hand: `kcompact translate` (one source offset to its sink offset) and
`kcompact sync-groups` (one round of consumer group offset sync, as `run --sync-group-offsets` does)."""

from __future__ import annotations

import argparse
import json

from streaming.security import redaction
from streaming.cli.pairs import add_cluster_access_options, parse_pairs, regex_option
from streaming.configuration.cluster_settings import sink_settings
from streaming.errors import UsageError


def add_parsers(sub) -> None:
    p = sub.add_parser("translate", help="the sink offset where a consumer of a source topic resumes")
    p.add_argument("--state-dir", required=True)
    p.add_argument("--topic", required=True, help="source topic")
    p.add_argument("--partition", type=int, required=True)
    p.add_argument("--offset", type=int, required=True,
                   help="the consumer's source offset: it resumes at the first sink record from this offset on")
    p.add_argument("--sink-kafka", action="append", default=[], metavar="KEY=VALUE",
                   help="librdkafka setting to reach the sink (credentials are not kept in the state dir)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_cmd_translate)

    p = sub.add_parser("sync-groups", help="one round of consumer group offset sync to the sink cluster, by hand")
    p.add_argument("--state-dir", required=True)
    p.add_argument("--group", required=True, metavar="REGEX", help="source consumer groups it matches whole")
    p.add_argument("--dry-run", action="store_true", help="print what would change, commit nothing")
    p.add_argument("--allow-rewind", action="store_true", help="let a sink group's offset move back")
    add_cluster_access_options(p)
    p.set_defaults(func=_cmd_sync_groups)


def _cmd_translate(args: argparse.Namespace) -> int:
    from streaming.job.spec import load_saved  # noqa: PLC0415
    from streaming.state.stores import open_state_dir  # noqa: PLC0415
    from streaming.cli.disaster import one_line  # noqa: PLC0415
    from streaming.kafka.admin import Cluster  # noqa: PLC0415
    from streaming.kafka.source.first_records import translate_all  # noqa: PLC0415
    from streaming.partition_id import PartitionId  # noqa: PLC0415

    sink_kafka = parse_pairs(args.sink_kafka, "--sink-kafka")
    redaction.register([sink_kafka])
    saved = load_saved(open_state_dir(args.state_dir))
    plan = saved.plan_of(args.topic, args.state_dir)
    if not 0 <= args.partition < plan.partitions:
        raise UsageError(f"topic {args.topic!r} has partitions 0..{plan.partitions - 1}, not {args.partition}")
    if args.offset < 0:
        raise UsageError(f"--offset must be >= 0, got {args.offset}")
    wanted = (PartitionId(plan.sink, args.partition), args.offset)
    with one_line(f"cannot translate {args.topic}-{args.partition} offset {args.offset}"):
        position = translate_all(Cluster("sink", saved.mapping.sink_bootstrap, sink_kafka), [wanted],
                                 f"the records of {wanted[0]}")[wanted]
    doc = {"topic": args.topic, "partition": args.partition, "offset": args.offset, "sink_topic": plan.sink,
           "sink_offset": position.sink_offset, "sink_record_source_offset": position.source_offset}
    print(json.dumps(doc) if args.json else
          f"{args.topic}-{args.partition} offset {args.offset} -> {plan.sink}-{args.partition} offset "
          f"{position.sink_offset}")
    return 0


def _cmd_sync_groups(args: argparse.Namespace) -> int:
    from streaming.job.group_sync import mirrored  # noqa: PLC0415
    from streaming.job.spec import load_saved  # noqa: PLC0415
    from streaming.state.stores import open_state_dir  # noqa: PLC0415
    from streaming.kafka.admin import Cluster  # noqa: PLC0415
    from streaming.kafka.groups.group_sync import GroupOffsetSync  # noqa: PLC0415

    pattern = regex_option(args.group, "--group")
    source_kafka = parse_pairs(args.kafka, "--kafka")
    saved = load_saved(open_state_dir(args.state_dir))
    sink_kafka = sink_settings(source_kafka, parse_pairs(args.sink_kafka, "--sink-kafka"), saved.mapping.one_cluster)
    redaction.register([source_kafka, sink_kafka])
    plans = saved.topics
    syncer = GroupOffsetSync(Cluster("source", saved.mapping.source_bootstrap, source_kafka),
                             Cluster("sink", saved.mapping.sink_bootstrap, sink_kafka), pattern, args.allow_rewind)
    done = syncer.sync(mirrored(plans), dry_run=args.dry_run)
    if args.json:
        print(json.dumps({"dry_run": args.dry_run, "offsets": [r.to_doc() for r in done.rows]}))
        return 0
    if not done.rows:
        print(f"no consumer group matching {args.group!r} has committed offsets on the mirrored topics")
        return 0
    verb = "would" if args.dry_run else "did"
    print(f"{'group':24} {'source partition':28} {'committed':>10} {'sink offset':>12} {'sink committed':>15}  "
          f"change ({verb})")
    for r in done.rows:
        print(f"{r.group:24} {f'{r.topic}-{r.partition}':28} {r.source_committed:>10} {r.sink_offset:>12} "
              f"{'-' if r.sink_committed is None else r.sink_committed:>15}  {r.change.value}")
    return 0
