"""The job's ACLs from the command line: `kcompact run --print-acls` (the least set the job's principal
needs, as kafka-acls.sh commands, or added with --apply), and `kcompact sync-acls` (one round of topic ACL sync
for the topics a state dir's job mirrors, by hand or from cron, as an admin apart from the least-privileged job;
with --dry-run it adds nothing and prints what it would add)."""

from __future__ import annotations

import argparse
import json

from streaming.security import redaction
from streaming.cli.pairs import add_cluster_access_options, parse_pairs
from streaming.configuration.cluster_settings import sink_settings
from streaming.errors import UsageError


def cmd_sync_acls(args: argparse.Namespace) -> int:
    """Apart from a least-privileged job, as an admin: --admin-config logs in to the sink (and on one cluster
    to the source), --source-admin-config to the source; without them, --kafka and --sink-kafka do."""
    from streaming.job.acl_sync import sinks_of  # noqa: PLC0415
    from streaming.job.spec import load_saved  # noqa: PLC0415
    from streaming.kafka.access.acl_sync import TopicAclSync  # noqa: PLC0415
    from streaming.kafka.access.acls import command_config_for  # noqa: PLC0415
    from streaming.kafka.admin import Cluster  # noqa: PLC0415
    from streaming.state.stores import open_state_dir  # noqa: PLC0415

    saved = load_saved(open_state_dir(args.state_dir))
    source_kafka = parse_pairs(args.kafka, "--kafka")
    sink_kafka = sink_settings(source_kafka, parse_pairs(args.sink_kafka, "--sink-kafka"), saved.mapping.one_cluster)
    source_admin = args.source_admin_config or (args.admin_config if saved.mapping.one_cluster else None)
    clusters = {}
    for role, bootstrap, kafka, admin, flag in (
            ("source", saved.mapping.source_bootstrap, source_kafka, source_admin,
             "--source-admin-config" if args.source_admin_config else "--admin-config"),
            ("sink", saved.mapping.sink_bootstrap, sink_kafka, args.admin_config, "--admin-config")):
        redaction.register([kafka])
        clusters[role] = admin_cluster(role, bootstrap, admin, flag) if admin else Cluster(role, bootstrap, kafka)
    syncer = TopicAclSync(clusters["source"], clusters["sink"], saved.principals())
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
    command_config = command_config_for(clusters["sink"].settings, args.admin_config)
    for g in grants:
        print(f"  {g.command(saved.mapping.sink_bootstrap, command_config)}")
    return 0


def print_acls(options, subscription, naming, source_kafka: dict, sink_kafka: dict) -> int:
    """For the topics the job would mirror now: a pattern's are asked of the source cluster. The commands name
    the admin's client properties a secured cluster needs (--command-config); with --apply the grants each
    cluster lacks are added through the admin API instead."""
    from streaming.configuration import config_providers  # noqa: PLC0415
    from streaming.kafka.access.acls import command_config_for  # noqa: PLC0415
    from streaming.kafka.admin import Cluster  # noqa: PLC0415
    from streaming.kafka.access.permissions import JobAccess, principal_of, required_grants  # noqa: PLC0415

    if options.apply and not options.admin_config:
        raise UsageError("--apply logs in with --admin-config FILE (an admin's client properties)")
    topics = subscription.names
    if not topics:
        source = Cluster("source", options.bootstrap_servers, source_kafka)
        topics = tuple(sorted(name for name, t in source.metadata().topics.items()
                              if subscription.matches(name) and t.error is None))
        print(f"# the topics matching '{subscription.pattern}' now; one created later needs its own ACLs")
    group = options.sync_group_offsets
    access = JobAccess(topics, tuple(naming.sink_of(t) for t in topics), options.dead_letter_topic,
                       (group,) if group else (), options.sync_topic_acls, not options.sink_bootstrap_servers)
    resolved = {"source": config_providers.resolve_all(source_kafka), "sink": config_providers.resolve_all(sink_kafka)}
    principals = {side: principal_of(kafka) for side, kafka in resolved.items()}
    where = {"source": options.bootstrap_servers, "sink": options.sink_bootstrap_servers or options.bootstrap_servers}
    admin = {"source": options.admin_config, "sink": options.sink_admin_config or options.admin_config}
    grants = required_grants(access, principals["source"], principals["sink"])
    if options.apply:
        return _apply(grants, where, admin)
    for side, grant in grants:
        print(grant.command(where[side], command_config_for(resolved[side], admin[side])))
    print("# a dry run: --apply --admin-config FILE adds those each cluster lacks through the admin API")
    return 0


def admin_cluster(role: str, bootstrap: str, path: str, flag: str):
    """A cluster reached as the admin whose client properties ``path`` holds (given with ``flag``); a
    bootstrap.servers in the file is the listener the admin logs in on."""
    from streaming.configuration.client_properties import read_client_properties  # noqa: PLC0415
    from streaming.kafka.admin import Cluster  # noqa: PLC0415

    settings = read_client_properties(path, flag)
    redaction.register([settings])
    return Cluster(role, settings.pop("bootstrap.servers", bootstrap), settings, given_by=f"{flag} {path}")


def _apply(grants, where: dict[str, str], admin: dict[str, str]) -> int:
    """Each cluster once (on one cluster both sides' grants together), logged in as its admin."""
    from streaming.kafka.access.acl_apply import apply_grants  # noqa: PLC0415

    by_cluster: dict[tuple[str, str], list] = {}
    for side, grant in grants:
        by_cluster.setdefault((where[side], admin[side]), []).append(grant)
    for (bootstrap, config), wanted in by_cluster.items():
        flag = "--admin-config" if config == admin["source"] else "--sink-admin-config"
        role = "source" if bootstrap == where["source"] else "sink"
        applied = apply_grants(admin_cluster(role, bootstrap, config, flag), wanted)
        for g in applied.added:
            print(f"added on {bootstrap}: {g.principal} {g.operation} on {g.on()}")
        print(f"{bootstrap}: {len(applied.added)} ACLs added, {len(applied.present)} already there")
    return 0


def add_parsers(sub) -> None:
    p = sub.add_parser("sync-acls", help="one round of topic ACL sync to the sink cluster, by hand")
    p.add_argument("--state-dir", required=True)
    p.add_argument("--dry-run", action="store_true", help="print the ACLs it would add, add nothing")
    p.add_argument("--admin-config", metavar="FILE",
                   help="the sink cluster's admin (ALTER on the cluster), and on one cluster the source's: client "
                        "properties as kafka-acls.sh --command-config takes them; the job itself then needs no "
                        "cluster ACL")
    p.add_argument("--source-admin-config", metavar="FILE",
                   help="the source cluster's admin (DESCRIBE on the cluster, to read its ACLs), when not "
                        "--admin-config's")
    add_cluster_access_options(p)
    p.set_defaults(func=cmd_sync_acls)
