"""The job's ACLs from the command line: `kcompact run --print-acls` (the least set the job's principal
needs, as kafka-acls.sh commands), and `kcompact sync-acls` (one round of topic ACL sync by hand, for the
topics a state dir's job mirrors; with --dry-run it adds nothing and prints what it would add)."""

from __future__ import annotations

import argparse
import json

from streaming import redaction
from streaming.cli.pairs import add_cluster_access_options, parse_pairs, sink_settings


def cmd_sync_acls(args: argparse.Namespace) -> int:
    from streaming.job.acl_sync import sinks_of  # noqa: PLC0415
    from streaming.job.spec import load_saved  # noqa: PLC0415
    from streaming.kafka.acl_sync import TopicAclSync  # noqa: PLC0415
    from streaming.kafka.admin import Cluster  # noqa: PLC0415
    from streaming.state.stores import open_state_dir  # noqa: PLC0415

    source_kafka = parse_pairs(args.kafka, "--kafka")
    saved = load_saved(open_state_dir(args.state_dir))
    sink_kafka = sink_settings(source_kafka, parse_pairs(args.sink_kafka, "--sink-kafka"), saved.mapping.one_cluster)
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


def print_acls(args: argparse.Namespace, subscription, naming, source_kafka: dict, sink_kafka: dict) -> int:
    """For the topics the job would mirror now: a pattern's are asked of the source cluster."""
    from streaming import config_providers  # noqa: PLC0415
    from streaming.kafka.admin import Cluster  # noqa: PLC0415
    from streaming.kafka.permissions import JobAccess, principal_of, required_grants  # noqa: PLC0415

    topics = subscription.names
    if not topics:
        source = Cluster("source", args.bootstrap_servers, source_kafka)
        topics = tuple(sorted(name for name, t in source.metadata().topics.items()
                              if subscription.matches(name) and t.error is None))
        print(f"# the topics matching '{subscription.pattern}' now; one created later needs its own ACLs")
    group = args.sync_group_offsets
    access = JobAccess(topics, tuple(naming.sink_of(t) for t in topics), args.dead_letter_topic,
                       (group,) if group else (), args.sync_topic_acls, not args.sink_bootstrap_servers)
    principals = {side: principal_of(config_providers.resolve_all(kafka))
                  for side, kafka in (("source", source_kafka), ("sink", sink_kafka))}
    where = {"source": args.bootstrap_servers, "sink": args.sink_bootstrap_servers or args.bootstrap_servers}
    for side, grant in required_grants(access, principals["source"], principals["sink"]):
        print(grant.command(where[side]))
    return 0


def add_parsers(sub) -> None:
    p = sub.add_parser("sync-acls", help="one round of topic ACL sync to the sink cluster, by hand")
    p.add_argument("--state-dir", required=True)
    p.add_argument("--dry-run", action="store_true", help="print the ACLs it would add, add nothing")
    add_cluster_access_options(p)
    p.set_defaults(func=cmd_sync_acls)
