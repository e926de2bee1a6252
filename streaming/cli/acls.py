"""`kcompact sync-acls`: one round of topic ACL sync by hand, for the topics a state dir's job mirrors; with
--dry-run it adds nothing and prints what it would add."""

from __future__ import annotations

import argparse
import json

from streaming import redaction
from streaming.cli.pairs import parse_pairs, sink_settings


def cmd_sync_acls(args: argparse.Namespace) -> int:
    from streaming.job.acl_sync import sinks_of  # noqa: PLC0415
    from streaming.job.spec import load_saved  # noqa: PLC0415
    from streaming.kafka.acl_sync import TopicAclSync  # noqa: PLC0415
    from streaming.kafka.admin import Cluster  # noqa: PLC0415
    from streaming.state.stores import open_state_dir  # noqa: PLC0415

    source_kafka = parse_pairs(args.kafka, "--kafka")
    saved = load_saved(open_state_dir(args.state_dir))
    sink_kafka = sink_settings(source_kafka, parse_pairs(args.sink_kafka, "--sink-kafka"),
                               same_cluster=saved.mapping.sink_bootstrap == saved.mapping.source_bootstrap)
    redaction.register([source_kafka, sink_kafka])
    syncer = TopicAclSync(Cluster("source", saved.mapping.source_bootstrap, source_kafka),
                          Cluster("sink", saved.mapping.sink_bootstrap, sink_kafka))
    sinks = sinks_of(saved.topics)
    grants = syncer.missing(sinks) if args.dry_run else syncer.sync(sinks)
    if args.json:
        print(json.dumps({"dry_run": args.dry_run, "added": [
            {"principal": g.principal, "host": g.host, "operation": g.operation, "topic": g.name} for g in grants]}))
        return 0
    if not grants:
        print(f"the sink topics have every ACL the source topics call for ({len(sinks)} topics)")
        return 0
    print(f"{'would add' if args.dry_run else 'added'} on {saved.mapping.sink_bootstrap}:")
    for g in grants:
        print(f"  {g.command(saved.mapping.sink_bootstrap)}")
    return 0
