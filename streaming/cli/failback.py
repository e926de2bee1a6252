"""`kcompact failback`: after a promote or a failover, the old primary is back. The diverged tail is counted,
exported and settled by --diverged; a reverse mirror (its own state dir) brings the DR site's writes to the old
primary, run here once to the end; and the groups move back with the exact translation."""

from __future__ import annotations

import argparse
import json
import logging
import shlex
import time

from streaming.cli.disaster import run_to_end
from streaming.cli.pairs import add_cluster_access_options, parse_pairs, regex_option
from streaming.errors import JobError, UsageError
from streaming.security import redaction

log = logging.getLogger("kcompact")


def add_parsers(sub) -> None:
    p = sub.add_parser("failback", help="back to the old primary after a promote or failover: the diverged tail "
                                        "exported and settled, the DR site's writes mirrored back, groups moved")
    p.add_argument("--state-dir", required=True, help="the state dir of the job that was promoted or failed over")
    p.add_argument("--reverse-state-dir", required=True,
                   help="the reverse mirror's own state dir (the DR site to the old primary)")
    p.add_argument("--diverged", required=True, choices=["drop", "keep"],
                   help="a key whose latest value is only in the old primary's diverged tail: drop (it gets the DR "
                        "site's value back, or a tombstone) or keep (the tail's value stays)")
    export = p.add_mutually_exclusive_group(required=True)
    export.add_argument("--export-topic-template", metavar="TEMPLATE",
                        help="export the diverged tail to this topic at the DR site, e.g. '{topic}.diverged'")
    export.add_argument("--export-file", metavar="FILE", help="export the diverged tail to this file (JSON lines)")
    p.add_argument("--group", default=".*", metavar="REGEX", help="the consumer groups moved back")
    p.add_argument("--admin-config", metavar="FILE",
                   help="an admin's client properties for the old primary: removes a promote's DENY WRITE ACLs")
    p.add_argument("--dry-run", action="store_true", help="count the diverged tail and print; change nothing")
    add_cluster_access_options(p)
    p.set_defaults(func=_cmd_failback)


def _cmd_failback(args: argparse.Namespace) -> int:
    from streaming.cli.disaster import one_line, switch_settings  # noqa: PLC0415
    from streaming.disaster.failback import (Diverged, Export, FailbackReport, Prepared,  # noqa: PLC0415
                                             read_prepared, write_prepared)
    from streaming.state.locks import StateDirLock  # noqa: PLC0415
    from streaming.disaster.mark import switched  # noqa: PLC0415
    from streaming.job.spec import load_saved  # noqa: PLC0415
    from streaming.kafka.admin import Cluster  # noqa: PLC0415
    from streaming.kafka.groups.group_positions import move_back  # noqa: PLC0415
    from streaming.partition_id import PartitionId  # noqa: PLC0415
    from streaming.startup.state_dir import checked_state_dir  # noqa: PLC0415
    from streaming.state.stores import check_access, open_state_dir  # noqa: PLC0415

    pattern = regex_option(args.group, "--group")
    if args.export_topic_template is not None and "{topic}" not in args.export_topic_template:
        raise UsageError(f"--export-topic-template must contain {{topic}}, got {args.export_topic_template!r}")
    if args.reverse_state_dir.rstrip("/") == args.state_dir.rstrip("/"):
        raise UsageError("--reverse-state-dir must be a state dir of its own, not --state-dir")
    state = open_state_dir(args.state_dir)
    check_access(state, write=False)
    saved = load_saved(state)
    switch = switched(state)
    if switch is None:
        raise JobError(f"the job of {args.state_dir} was neither promoted nor failed over: there is nothing to fail "
                       f"back (kcompact promote or failover first)")
    mapping = saved.mapping
    if mapping.one_cluster:
        raise JobError(f"the job of {args.state_dir} mirrors within one cluster: failback is for a DR site on a "
                       f"cluster of its own")
    if "{topic}" in mapping.sink_template and mapping.sink_template != "{topic}":
        raise JobError(f"failback mirrors the DR site's topics back under the names they came from: it needs a job "
                       f"that kept them ('{{topic}}' or --sink-topic), not {mapping.sink_template!r}")
    if saved.source_cluster_id is None:
        raise JobError(f"the job of {args.state_dir} ran with a kcompact from before records named the cluster they "
                       f"came from: a reverse mirror could not tell them from the DR site's own writes and would copy "
                       f"them back; fail back by hand (docs/disaster-recovery.md)")
    primary_topic_of = {plan.sink: topic for topic, plan in saved.topics.items()}
    values: dict = {"bootstrap.servers": mapping.sink_bootstrap, "source.topic": tuple(sorted(primary_topic_of)),
                    "sink.bootstrap.servers": mapping.source_bootstrap}
    if mapping.sink_template == "{topic}":
        values["sink.topic.template"] = "{topic}"
    else:
        values["sink.topic"] = next(iter(saved.topics))
    reverse = checked_state_dir(args.reverse_state_dir, reverse_mapping(values), write=not args.dry_run)
    source_kafka, sink_kafka = switch_settings(saved, parse_pairs(args.kafka, "--kafka"),
                                               parse_pairs(args.sink_kafka, "--sink-kafka"))
    redaction.register([source_kafka, sink_kafka])
    primary = Cluster("old primary", mapping.source_bootstrap, source_kafka)
    dr = Cluster("DR site", mapping.sink_bootstrap, sink_kafka)
    policy = Diverged(args.diverged)
    export = Export(args.export_topic_template, args.export_file)
    unfence = (lambda: ()) if args.dry_run else (lambda: _unfence(switch.fenced_topics, primary, args.admin_config))

    lock = None if args.dry_run else StateDirLock(reverse)
    try:
        with one_line(f"kcompact failback of {args.state_dir}"):
            prepared = read_prepared(reverse)
            if prepared is not None and prepared.settled is not None:
                partitions = prepared.settled
                unfenced = unfence()
                log.info("failback: the diverged tail was settled by an earlier failback into %s; it is not read "
                         "again", args.reverse_state_dir)
            else:
                partitions, unfenced = _settle(saved, switch, primary, dr, policy, export, args.dry_run, reverse,
                                               None if prepared is None else prepared.ranges, unfence)
            if not args.dry_run:
                run_to_end(args, reverse, values, saved, sink_kafka, source_kafka)
            dr_partitions = [PartitionId(plan.sink, p) for plan in saved.topics.values() for p in range(plan.partitions)]
            moved = move_back(dr, primary, pattern, primary_topic_of, dr_partitions, args.dry_run)
        done = FailbackReport(int(time.time() * 1000), policy, export.describe(), switch, tuple(partitions), unfenced, tuple(moved),
                              args.reverse_state_dir, args.dry_run)
        if not args.dry_run:
            write_prepared(reverse, Prepared(read_prepared(reverse).ranges, partitions, done.to_doc()))
    finally:
        if lock is not None:
            lock.release()
    if args.json:
        print(json.dumps(done.to_doc()))
        return 0
    print(done.render())
    if not args.dry_run:
        print(f"keep the reverse mirror running until the producers move back (kcompact status --state-dir "
              f"{args.reverse_state_dir} says when the old primary has caught up):\n  kcompact run "
              f"{command_flags({**values, 'state.dir': args.reverse_state_dir})}")
    return 0


def reverse_mapping(values: dict):
    """The reverse mirror's mapping as its run will save it, to refuse a reverse state dir of another job first."""
    from streaming.configuration.subscription import subscription_of  # noqa: PLC0415
    from streaming.job.spec import JobMapping  # noqa: PLC0415
    from streaming.job.topics import SinkNaming  # noqa: PLC0415

    subscription = subscription_of(values["source.topic"], None)
    naming = SinkNaming.of(values.get("sink.topic"), values.get("sink.topic.template"), subscription)
    return JobMapping(values["bootstrap.servers"], subscription, values["sink.bootstrap.servers"], naming.template)


def command_flags(values: dict) -> str:
    """Run options by setting name as the command line gives them."""
    from streaming.configuration.settings import RUN_OPTIONS  # noqa: PLC0415

    words = []
    for name, value in values.items():
        for one in value if isinstance(value, tuple) else (value,):
            words += [RUN_OPTIONS[name].flag, shlex.quote(str(one))]
    return " ".join(words)


def _unfence(topics: tuple[str, ...], primary, admin_config: str | None) -> tuple[str, ...]:
    """A promote's DENY WRITE ACLs go: the reverse mirror writes to those topics, and so will the producers."""
    if not topics:
        return ()
    if not admin_config:
        raise UsageError(f"the promote fenced writes to {len(topics)} topic(s) of the old primary with DENY ACLs; "
                         f"give --admin-config FILE (an admin's client properties) so failback removes them")
    from streaming.cli.acls import admin_cluster  # noqa: PLC0415
    from streaming.kafka.access.acls import Grant, Resource, remove_grants  # noqa: PLC0415

    admin = admin_cluster("source", primary.bootstrap_servers, admin_config, "--admin-config")
    remove_grants(admin.bootstrap_servers, [Grant("User:*", "WRITE", Resource.TOPIC, t, deny=True) for t in topics],
                  admin.settings)
    log.warning("the promote's DENY WRITE ACLs are removed from %d topic(s) of %s", len(topics),
                primary.bootstrap_servers)
    return topics


def _settle(saved, switch, primary, dr, policy, export, dry_run: bool, reverse, ranges_before: dict | None, unfence
            ) -> tuple[list, tuple[str, ...]]:
    """The diverged tail of every mirrored partition: read from the old primary (the ranges an interrupted
    failback recorded, else past the report's last mirrored offsets to the primary's end now), exported, and
    its keys settled by the policy (in a dry run, only counted). The promote's fence goes after the read and
    before the first write."""
    from streaming.disaster.failback import (Export, Prepared, TailPartition, TailReader, dr_latest,  # noqa: PLC0415
                                             settle, write_prepared)
    from streaming.kafka.clients import RecordProducer  # noqa: PLC0415
    from streaming.partition_id import PartitionId  # noqa: PLC0415

    first = {PartitionId(p.topic, p.partition): p.first_unmirrored_offset for p in switch.partitions}
    sink_of = {PartitionId(t, p): PartitionId(plan.sink, p) for t, plan in saved.topics.items()
               for p in range(plan.partitions)}
    if ranges_before is None:
        try:
            ends = primary.end_offsets(sink_of, timeout_s=30.0)
        except Exception as exc:  # noqa: BLE001 (named in one line: failback needs the old primary)
            raise JobError(f"the old primary {primary.bootstrap_servers} did not answer ({exc}); failback needs it "
                           f"back") from None
        ranges = {p: (first.get(p, 0), end) for p, end in ends.items()}
    else:
        ranges = ranges_before
        log.warning("failback: an earlier failback into this reverse state dir stopped before the end; the same "
                    "diverged tail is read and exported again (an export topic may hold some of it twice)")
    if not dry_run:
        write_prepared(reverse, Prepared(ranges, None, None))
    if export.topic_template and not dry_run:
        dr.ensure_topics({export.topic_template.format(topic=t): (plan.partitions, {})
                          for t, plan in saved.topics.items()}, "diverged tail export")
    reader = TailReader(primary.settings_with_bootstrap, Export() if dry_run else export,
                        lambda: RecordProducer(dr.bootstrap_servers, dr.settings))
    latest = reader.read(ranges)
    tails = {p: TailPartition(p.topic, p.partition, start, end, reader.figures[p].records)
             for p, (start, end) in ranges.items()}
    wanted = {sink_of[p]: set(keys) for p, keys in latest.items() if keys}
    dr_ends = dr.end_offsets(list(wanted), timeout_s=30.0) if wanted else {}
    at_dr = dr_latest(dr.settings_with_bootstrap, {p: (0, end) for p, end in dr_ends.items()}, wanted)
    unfenced = unfence()
    producer = None if dry_run else RecordProducer(primary.bootstrap_servers, primary.settings)
    settle(tails, latest, at_dr, sink_of, policy, dr.cluster_id(),
           lambda pid, record: producer.send(pid.topic, record, pid.partition, keep_time=record.timestamp_ms >= 0)
           if producer is not None else None, {t: plan.compaction for t, plan in saved.topics.items()})
    if producer is not None:
        producer.flush(120.0)
    return [tails[p] for p in sorted(tails)], unfenced
