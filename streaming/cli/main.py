"""The `kcompact` command line: run the compactor, inspect its state, or try it on a local broker."""

from __future__ import annotations

import argparse
import functools
import json
import logging
import os
import re
import sys
import time
import traceback
from typing import TYPE_CHECKING, Sequence

from streaming import __version__, config_providers, logging_setup, redaction
from streaming.cli import acls, broker, spark_submit
from streaming.cli.pairs import parse_pairs, sink_settings
from streaming.errors import USER_ERRORS, UsageError
from streaming.kafka.subscription import StartingOffsets, subscription_of

if TYPE_CHECKING:  # types only: --help, status and dump load neither a Kafka client nor the cleaner
    from streaming.cleaner import Overrides
    from streaming.kafka.admin import Cluster

log = logging.getLogger("kcompact")

CONNECT_TIMEOUT_S = 30.0  # the longest wait for a cluster to answer at start
LATE_FIRST_EMISSION_MS = 3_600_000  # a continuous run warns when records may wait longer than this for the sink


def _cmd_submit_file(args: argparse.Namespace) -> int:
    print(spark_submit.APPLICATION)
    return 0


def _cmd_run(args: argparse.Namespace) -> int:
    from streaming.cli import config_file  # noqa: PLC0415
    from streaming.job.topics import SinkNaming  # noqa: PLC0415
    from streaming.cleaner import KeylessPolicy, Overrides  # noqa: PLC0415

    for dest in REQUIRED_TO_RUN:
        if not getattr(args, dest):
            raise UsageError(f"--{dest.replace('_', '-')} is required (or {config_file.key_of(dest)} in --config-file)")
    overrides = Overrides.parse(parse_pairs(args.config, "--config"))  # before any cluster is contacted
    if overrides.values.get("keyless_policy") == KeylessPolicy.DEAD_LETTER and not args.dead_letter_topic:
        raise UsageError("compaction.keyless.policy=dead-letter needs --dead-letter-topic")
    source_kafka = parse_pairs(args.kafka, "--kafka")
    sink_kafka = sink_settings(source_kafka, parse_pairs(args.sink_kafka, "--sink-kafka"),
                               same_cluster=not args.sink_bootstrap_servers)
    redaction.register([source_kafka, sink_kafka])
    sink_topic_config = parse_pairs(args.sink_topic_config, "--sink-topic-config")
    spark_conf = parse_pairs(args.spark_conf, "--spark-conf")
    if args.print_config:
        print(redaction.mask(config_file.render(args, args.subparser)), end="")
        return 0
    for settings in (source_kafka, sink_kafka, spark_conf):  # a missing secret file is one line now, not later
        redaction.register_values(config_providers.resolve_all(settings)[k]
                                  for k in config_providers.referenced(settings))
    if args.print_acls:
        subscription = subscription_of(args.source_topic, args.source_topic_pattern)
        naming = SinkNaming.of(args.sink_topic, args.sink_topic_template, subscription)
        return acls.print_acls(args, subscription, naming, source_kafka, sink_kafka)
    for option, value in (("--trigger-interval", args.trigger_interval), ("--retry-timeout", args.retry_timeout),
                          ("--sync-topic-acls-interval", args.sync_topic_acls_interval)):
        if value <= 0:
            raise UsageError(f"{option} must be > 0 seconds, got {value}")
    if args.max_offsets_per_trigger is not None and args.max_offsets_per_trigger <= 0:
        raise UsageError(f"--max-offsets-per-trigger must be > 0, got {args.max_offsets_per_trigger}")
    if args.drain and not args.once:
        raise UsageError("--drain is for --once (a continuous run rolls segments by segment.ms and "
                         "max.compaction.lag.ms)")
    return _start(args, overrides, source_kafka, sink_kafka, sink_topic_config, spark_conf)


REQUIRED_TO_RUN = ("bootstrap_servers", "state_dir")


def _start(args: argparse.Namespace, overrides: Overrides, source_kafka: dict, sink_kafka: dict, sink_topic_config: dict,
           spark_conf: dict) -> int:
    """Checks that read (the state dir, then the clusters) before anything is created anywhere; then the
    sink topics, the state dir and the Spark session."""
    from streaming.job.metrics import serve as serve_metrics  # noqa: PLC0415
    from streaming.job.progress import ProgressDisplay  # noqa: PLC0415
    from streaming.job.runner import CompactorJob  # noqa: PLC0415
    from streaming.job.spec import JobMapping, JobSpec, check_state_dir_mapping  # noqa: PLC0415
    from streaming.job.topics import SinkNaming, TopicSync  # noqa: PLC0415
    from streaming.cli.security import spark_settings, warn_if_readable_by_others  # noqa: PLC0415
    from streaming.kafka.admin import Cluster  # noqa: PLC0415
    from streaming.kafka.permissions import AccessCheck, JobAccess  # noqa: PLC0415
    from streaming.spark.driver import SparkEngine  # noqa: PLC0415
    from streaming.spark.session import build_session  # noqa: PLC0415
    from streaming.state.locks import StateDirLock  # noqa: PLC0415
    from streaming.state.stores import check_access, open_state_dir  # noqa: PLC0415

    sink_bootstrap = args.sink_bootstrap_servers or args.bootstrap_servers
    subscription = subscription_of(args.source_topic, args.source_topic_pattern)
    naming = SinkNaming.of(args.sink_topic, args.sink_topic_template, subscription)
    starting = StartingOffsets.parse(args.starting_offsets, subscription)
    group_pattern = _group_sync_pattern(args)
    mapping = JobMapping(args.bootstrap_servers, subscription, sink_bootstrap, naming.template)
    state = open_state_dir(args.state_dir)
    check_access(state, write=True)
    check_state_dir_mapping(state, mapping)
    warn_if_readable_by_others(state.root if state.local else None, "--state-dir")
    warn_if_readable_by_others(args.checkpoint_location, "--checkpoint-location")

    wait = min(CONNECT_TIMEOUT_S, args.retry_timeout)
    source = Cluster("source", args.bootstrap_servers, source_kafka, connect_timeout_s=wait)
    sink = Cluster("sink", sink_bootstrap, sink_kafka, connect_timeout_s=wait)
    sync = TopicSync(source, sink, subscription, naming, overrides, sink_topic_config, args.dead_letter_topic)
    permissions = AccessCheck(source, sink)  # both clusters have answered and accepted the login
    permissions.named_source_topics(subscription.names)
    group_sync = None if group_pattern is None else _group_sync_schedule(args, group_pattern, source, sink)
    present = sync.present()
    if not present:
        if args.once:
            raise UsageError(f"no topic on the source cluster matches --source-topic-pattern "
                             f"'{subscription.pattern}'; nothing to do")
        log.warning("no topic on the source cluster matches --source-topic-pattern '%s' yet; waiting for one",
                    subscription.pattern)
    sync.refuse_sinks(present)
    access = JobAccess(tuple(sorted(present)), tuple(naming.sink_of(t) for t in sorted(present)),
                       args.dead_letter_topic, _synced_groups(group_pattern, group_sync), args.sync_topic_acls,
                       sync.same_cluster)
    permissions.before_creating(access)
    _check_starting_offsets(starting, present, source)
    plans = sync.sync({})
    permissions.after_creating(access)
    lock = StateDirLock(state)
    previous_umask = os.umask(0o077)  # the state dir is a copy of the mirrored data: for this user only
    try:
        spec = JobSpec(mapping, args.state_dir, plans, source_kafka=source_kafka,
                       sink_kafka=sink_kafka, dead_letter_topic=args.dead_letter_topic,
                       trigger_interval_ms=round(args.trigger_interval * 1000))
        _print_plans(spec, source_kafka, sink_kafka)
        if not args.once:
            _warn_of_late_first_emission(spec)
        spec.save(state)
        public_conf, secret_conf = spark_settings(spark_conf)
        extra = {**logging_setup.for_workers(args.log_level, args.log_format), **public_conf}
        engine = SparkEngine(lambda: build_session("kcompact", master=args.spark_master, log_level=args.log_level,
                                                   extra=extra, secret=secret_conf))  # started when first needed
        job = CompactorJob(engine, spec, sync, trigger_interval_s=args.trigger_interval, once=args.once,
                           checkpoint_location=args.checkpoint_location,
                           max_offsets_per_trigger=args.max_offsets_per_trigger,
                           starting_offsets=starting, retry_timeout_s=args.retry_timeout,
                           group_sync=group_sync, drain=args.drain, allow_data_loss=args.allow_data_loss,
                           live_progress=ProgressDisplay.wanted_live(args.log_format),
                           acl_sync=_acl_sync_schedule(args, source, sink))
        if args.metrics_port is not None:
            serve_metrics(job.collector, args.metrics_port, args.metrics_host)
            log.info("Prometheus metrics on http://%s:%d/metrics", args.metrics_host, args.metrics_port)
        return job.run()
    finally:
        lock.release()
        os.umask(previous_umask)


def _group_pattern(text: str, option: str) -> re.Pattern[str]:
    try:
        return re.compile(text)
    except re.error as exc:
        raise UsageError(f"{option} {text!r} is not a regular expression: {exc}") from None


def _group_sync_pattern(args: argparse.Namespace) -> re.Pattern[str] | None:
    """--sync-group-offsets and its options, refused in one line before any cluster is contacted."""
    if args.sync_group_offsets is None:
        if args.sync_group_offsets_allow_rewind:
            raise UsageError("--sync-group-offsets-allow-rewind needs --sync-group-offsets REGEX")
        return None
    if args.sync_group_offsets_interval <= 0:
        raise UsageError(f"--sync-group-offsets-interval must be > 0 seconds, got {args.sync_group_offsets_interval}")
    return _group_pattern(args.sync_group_offsets, "--sync-group-offsets")


def _group_sync_schedule(args: argparse.Namespace, pattern: re.Pattern[str], source: Cluster, sink: Cluster):
    """The job's group offset sync, on the clusters the job itself uses."""
    from streaming.job.group_sync import GroupSyncSchedule  # noqa: PLC0415
    from streaming.kafka.group_sync import GroupOffsetSync, GroupSyncTotals  # noqa: PLC0415

    syncer = GroupOffsetSync(source, sink, pattern, args.sync_group_offsets_allow_rewind)
    return GroupSyncSchedule(syncer, args.sync_group_offsets_interval, GroupSyncTotals())


def _synced_groups(pattern: re.Pattern[str] | None, schedule) -> tuple[str, ...]:
    """The groups whose ACLs the start can check: those the pattern names literally, and those the source
    lists to the principal now (a group it may not describe is not listed to it)."""
    if pattern is None:
        return ()
    literal = (pattern.pattern,) if re.escape(pattern.pattern).replace("\\-", "-") == pattern.pattern else ()
    return tuple(sorted({*literal, *schedule.syncer.groups()}))


def _acl_sync_schedule(args: argparse.Namespace, source: Cluster, sink: Cluster):
    if not args.sync_topic_acls:
        return None
    from streaming.job.acl_sync import AclSyncSchedule  # noqa: PLC0415
    from streaming.kafka.acl_sync import TopicAclSync  # noqa: PLC0415

    return AclSyncSchedule(TopicAclSync(source, sink), args.sync_topic_acls_interval)


def _check_starting_offsets(starting: StartingOffsets, present: dict[str, int], source: Cluster) -> None:
    """Every partition of each topic named, each offset within what the partition holds now: an offset past
    the end would leave the partition unread until it grew that far, one below the start names deleted
    records."""
    for topic in sorted(starting.topics):
        if topic not in present:
            raise UsageError(f"--starting-offsets names topic {topic!r}, which does not exist on the source")
        offsets = {pid.partition: o for pid, o in starting.given.items() if pid.topic == topic}
        if set(offsets) != set(range(present[topic])):
            raise UsageError(f"--starting-offsets must give every partition of {topic!r} (0..{present[topic] - 1}), "
                             f"got {sorted(offsets)}")
        ranges = source.offset_ranges(topic, range(present[topic]))
        for p, offset in sorted(offsets.items()):
            low, high = ranges[p]
            if offset >= 0 and not low <= offset <= high:
                where = "below the log start" if offset < low else "beyond the log end"
                raise UsageError(f"--starting-offsets: {topic}-{p} offset {offset} is {where}; the partition holds "
                                 f"offsets {low}..{high} (give one in that range, -2 for earliest or -1 for latest)")


def _print_plans(spec, source_kafka: dict, sink_kafka: dict) -> None:
    def side(bootstrap: str, settings: dict) -> str:
        return f"{bootstrap} {redaction.redact(settings)}" if settings else bootstrap

    print(f"mirroring {len(spec.topics)} topic(s) from {side(spec.source_bootstrap, source_kafka)} "
          f"to {side(spec.sink_bootstrap, sink_kafka)}")
    for topic, plan in sorted(spec.topics.items()):
        print(f"  {topic} ({plan.partitions} partitions) -> {plan.sink}; effective configuration:")
        for key, value in plan.compaction.to_kafka().items():
            print(f"    {key}={value}")
    sys.stdout.flush()


def _warn_of_late_first_emission(spec) -> None:
    """Kafka's defaults hold every record in its active segment for a week: a mirror for disaster recovery
    that emits nothing for days should say so at start, not leave it to the manual."""
    from streaming.cli.readable import bytes_text, duration_text  # noqa: PLC0415

    for topic, plan in sorted(spec.topics.items()):
        config = plan.compaction
        if config.longest_hold_ms > LATE_FIRST_EMISSION_MS:
            log.warning("%s: records reach %s only once their segment is cleaned: up to %s after they arrive "
                        "(segment.ms=%s, max.compaction.lag.ms=%s) unless %s of them fill segment.bytes first; set "
                        "max.compaction.lag.ms to bound it, e.g. --config max.compaction.lag.ms=60000", topic,
                        plan.sink, duration_text(config.longest_hold_ms), duration_text(config.segment_ms),
                        duration_text(config.max_compaction_lag_ms), bytes_text(config.segment_bytes))


def _cmd_status(args: argparse.Namespace) -> int:
    from streaming.cli.status import collect_status, render_table  # noqa: PLC0415

    status = collect_status(args.state_dir, int(time.time() * 1000))
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
    query = Query(args.topic, args.key, None if args.since is None else parse_since(args.since), args.overdue)
    found, saved = collect_erasures(args.state_dir, query, int(time.time() * 1000))
    sink_kafka = sink_settings(source_kafka, parse_pairs(args.sink_kafka, "--sink-kafka"), saved.mapping.one_cluster)
    redaction.register([source_kafka, sink_kafka])
    source = Cluster("source", saved.mapping.source_bootstrap, source_kafka, connect_timeout_s=args.cluster_timeout)
    sink = Cluster("sink", saved.mapping.sink_bootstrap, sink_kafka, connect_timeout_s=args.cluster_timeout)

    def configs(cluster: Cluster, topic: str, keys: tuple[str, ...]) -> dict[str, str] | str:
        try:
            return cluster.topic_configs(topic, keys)
        except Exception as exc:  # noqa: BLE001 (the audit stands without it; the line says what is missing)
            return str(exc).splitlines()[0]

    for topic, plan in sorted(saved.topics.items()):
        if args.topic in (None, topic):
            found.outside += outside_notes(configs(source, topic, SOURCE_KEYS), configs(sink, plan.sink, SINK_KEYS),
                                           topic, plan.sink)
    print(json.dumps(found.to_doc(), indent=2) if args.json else render_table(found))
    return 1 if args.overdue and found.overdue else 0


def _cmd_translate(args: argparse.Namespace) -> int:
    from streaming.job.spec import load_saved  # noqa: PLC0415
    from streaming.state.stores import open_state_dir  # noqa: PLC0415
    from streaming.kafka.translate import SinkReader, translate  # noqa: PLC0415

    sink_kafka = parse_pairs(args.sink_kafka, "--sink-kafka")
    redaction.register([sink_kafka])
    saved = load_saved(open_state_dir(args.state_dir))
    plan = saved.plan_of(args.topic, args.state_dir)
    if not 0 <= args.partition < plan.partitions:
        raise UsageError(f"topic {args.topic!r} has partitions 0..{plan.partitions - 1}, not {args.partition}")
    if args.offset < 0:
        raise UsageError(f"--offset must be >= 0, got {args.offset}")
    with SinkReader(saved.mapping.sink_bootstrap, plan.sink, args.partition, sink_kafka) as reader:
        position = translate(reader, args.offset)
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
    from streaming.kafka.group_sync import GroupOffsetSync  # noqa: PLC0415

    pattern = _group_pattern(args.group, "--group")
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


def _cmd_demo(args: argparse.Namespace) -> int:
    from streaming.brokers.choice import acquire_broker  # noqa: PLC0415 (imports confluent-kafka)
    from streaming.cli.demo import run_demo  # noqa: PLC0415

    with acquire_broker() as broker:
        return run_demo(broker.bootstrap_servers, sys.stdout, main, args.state_dir)


def _cmd_produce_changes(args: argparse.Namespace) -> int:
    from streaming.cli.demo import ChangeTopic, produce_changes  # noqa: PLC0415

    topic = ChangeTopic(args.topic, args.partitions, args.replication_factor, args.compact, args.keys)
    return produce_changes(args.bootstrap_servers, topic, args.count, args.interval, sys.stdout)


class HelpFormatter(argparse.HelpFormatter):
    """Each option's default at the end of its help, unless it has none or the help names it already."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if (not action.option_strings or "default" in text or action.default in (None, False, [])
                or action.default is argparse.SUPPRESS):
            return text
        return f"{text} (default: %(default)s)".lstrip()


def _by_hand_options(p: argparse.ArgumentParser) -> None:
    """How a command run by hand on a job's state dir reaches the job's two clusters (whose addresses the state
    dir keeps, and whose credentials it never does)."""
    p.add_argument("--kafka", action="append", default=[], metavar="KEY=VALUE",
                   help="librdkafka setting to reach the source (credentials are not kept in the state dir)")
    p.add_argument("--sink-kafka", action="append", default=[], metavar="KEY=VALUE",
                   help="librdkafka setting to reach the sink (on one cluster, --kafka's apply first)")
    p.add_argument("--json", action="store_true")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kcompact", description=__doc__, formatter_class=HelpFormatter)
    parser.add_argument("--version", action="version", version=f"kcompact {__version__}")
    parser.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"],
                        help="the lowest level of log line shown, kcompact's and Spark's (Spark's INFO only at DEBUG)")
    parser.add_argument("--log-format", default="text", choices=["text", "json"],
                        help="log lines on stderr: text for people, json (one object per line) for log shippers")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser = functools.partial(sub.add_parser, formatter_class=HelpFormatter)  # every command shows defaults

    p = sub.add_parser("run", help="compact source topics into sink topics", allow_abbrev=False)
    p.add_argument("--config-file", metavar="FILE",
                   help="run's options and topic configs in Kafka's .properties form (bootstrap.servers=..., "
                        "state.dir=..., min.cleanable.dirty.ratio=..., kafka.*, sink.kafka.*, spark.*); "
                        "command-line flags win")
    p.add_argument("--print-config", action="store_true",
                   help="print the effective configuration (command line over --config-file) and exit")
    p.add_argument("--print-acls", action="store_true",
                   help="print the ACLs the job's principal needs, as kafka-acls.sh commands, and exit")
    p.add_argument("--bootstrap-servers", help="source cluster (required)")
    p.add_argument("--source-topic", action="append", default=[], metavar="TOPIC",
                   help="a source topic (repeatable)")
    p.add_argument("--source-topic-pattern", metavar="REGEX",
                   help="every source topic the regular expression matches whole, topics created later included")
    p.add_argument("--sink-topic", help="the sink topic, for one --source-topic")
    p.add_argument("--sink-topic-template", metavar="TEMPLATE",
                   help="each source topic's sink, with {topic} for the source topic's name, e.g. '{topic}.compacted'")
    p.add_argument("--state-dir", help="where the partition logs and the job's state live (required)")
    p.add_argument("--sink-bootstrap-servers", help="sink cluster (default: the source cluster)")
    p.add_argument("--config", action="append", default=[], metavar="KEY=VALUE",
                   help="compaction setting under Kafka's name (overrides what the source topic sets)")
    p.add_argument("--kafka", action="append", default=[], metavar="KEY=VALUE",
                   help="librdkafka setting for the source side (security.protocol, sasl.*, ssl.*)")
    p.add_argument("--sink-kafka", action="append", default=[], metavar="KEY=VALUE",
                   help="librdkafka setting for the sink side (on one cluster, --kafka's apply first)")
    p.add_argument("--sink-topic-config", action="append", default=[], metavar="KEY=VALUE",
                   help="topic config when the sink topic is created (default cleanup.policy=compact)")
    p.add_argument("--dead-letter-topic", help="where keyless records go with compaction.keyless.policy=dead-letter")
    p.add_argument("--checkpoint-location", help="Spark checkpoint (default: STATE_DIR/checkpoint)")
    p.add_argument("--trigger-interval", type=float, default=5.0, metavar="SECONDS",
                   help="time between micro-batches; also how often an idle job cleans and emits")
    p.add_argument("--max-offsets-per-trigger", type=int, default=None, metavar="N",
                   help="records read per micro-batch at most, over all partitions (default: all available)")
    p.add_argument("--starting-offsets", default="earliest",
                   help="where a new job starts reading: earliest, latest, or JSON like "
                        "'{\"topic\":{\"0\":23,\"1\":-2}}' (-2 earliest, -1 latest) naming every partition; "
                        "ignored once the job has a checkpoint")
    p.add_argument("--allow-data-loss", action="store_true",
                   help="go on from the log start when source records were deleted (retention) before the job "
                        "read them (default: stop, naming the partition and the lost offsets)")
    p.add_argument("--metrics-port", type=int, default=None,
                   help="serve Prometheus metrics on this port (default: none; metrics.json is always written)")
    p.add_argument("--metrics-host", default="0.0.0.0", help="address the metrics endpoint binds (default 0.0.0.0)")
    p.add_argument("--retry-timeout", type=float, default=300.0, metavar="SECONDS",
                   help="how long to keep retrying while a cluster is unreachable, counted from the last "
                        f"progress, before the job gives up (default 300); at start, each cluster is waited for "
                        f"this long, at most {CONNECT_TIMEOUT_S:.0f}s")
    p.add_argument("--spark-master", default=None, help="default: local[2] or $KCOMPACT_SPARK_MASTER")
    p.add_argument("--spark-conf", action="append", default=[], metavar="KEY=VALUE",
                   help="Spark setting (repeatable), e.g. spark.jars.packages=org.apache.hadoop:hadoop-aws:3.4.1 "
                        "or spark.executor.memory=4g")
    p.add_argument("--once", action="store_true",
                   help="ingest what is there now, clean at the current time, emit, exit")
    p.add_argument("--drain", action="store_true",
                   help="with --once: roll every active segment after ingesting, so everything not held back by "
                        "min.compaction.lag.ms is cleaned and emitted (a one-shot compaction of a topic)")
    p.add_argument("--sync-group-offsets", metavar="REGEX", default=None,
                   help="commit, for each source consumer group the expression matches whole, its offsets on the "
                        "mirrored topics translated exactly to the sink topics, on the sink cluster (default: none)")
    p.add_argument("--sync-group-offsets-interval", type=float, default=30.0, metavar="SECONDS",
                   help="time between two group offset syncs (default 30)")
    p.add_argument("--sync-group-offsets-allow-rewind", action="store_true",
                   help="let a sync move a sink group's offset back (default: never)")
    p.add_argument("--sync-topic-acls", action="store_true",
                   help="copy each mirrored topic's ALLOW READ/DESCRIBE ACLs (ALL as READ) to its sink topic, at "
                        "start and every interval, as MirrorMaker 2 does; WRITE is never copied")
    p.add_argument("--sync-topic-acls-interval", type=float, default=600.0, metavar="SECONDS",
                   help="time between two topic ACL syncs")
    p.set_defaults(func=_cmd_run, subparser=p)

    p = sub.add_parser("status", help="per-partition log and cleaner state, and the cleaner's metrics")
    p.add_argument("--state-dir", required=True)
    p.add_argument("--json", action="store_true")
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
    p.add_argument("--topic", default=None, help="only this source topic's tombstones")
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
    _by_hand_options(p)
    p.set_defaults(func=_cmd_sync_groups)

    p = sub.add_parser("sync-acls", help="one round of topic ACL sync to the sink cluster, by hand")
    p.add_argument("--state-dir", required=True)
    p.add_argument("--dry-run", action="store_true", help="print the ACLs it would add, add nothing")
    _by_hand_options(p)
    p.set_defaults(func=acls.cmd_sync_acls)

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

    p = sub.add_parser("broker", help="run a local Apache Kafka (KRaft) in the foreground: one node, or a cluster "
                                      "of three (replication 3, min.insync.replicas 2)")
    p.add_argument("--brokers", type=int, choices=[1, 3], default=1, help="nodes (default 1)")
    p.add_argument("--port", type=int, default=None, help="port on 127.0.0.1 (default: a free one)")
    p.add_argument("--data-dir", default=None, help="broker data directory (default: a temporary one)")
    p.add_argument("--secure", action="store_true",
                   help="also print how to reach the TLS listeners (SCRAM-SHA-512 over SASL_SSL, mTLS), where ACLs "
                        "are enforced, and write a --config-file for each")
    p.set_defaults(func=broker.cmd_broker)

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

    spark_submit.add_parser(sub)

    p = sub.add_parser("submit-file", help="print the application file to hand spark-submit (docs/cluster.md)")
    p.set_defaults(func=_cmd_submit_file)

    p = sub.add_parser("demo", help="compact a small change stream on a local broker and show the result")
    p.add_argument("--state-dir", default=None, help="keep the demo's state here (default: a temporary dir)")
    p.set_defaults(func=_cmd_demo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    logging_setup.configure(args.log_level, args.log_format)
    try:
        if args.command == "run":
            from streaming.cli.security import PAIR_OPTIONS, warn_secrets_on_command_line  # noqa: PLC0415

            warn_secrets_on_command_line({dest: getattr(args, dest) for dest, _ in PAIR_OPTIONS})
        if getattr(args, "config_file", None):
            _read_config_file(args, argv)
        return args.func(args)
    except USER_ERRORS as exc:
        print(f"kcompact: error: {redaction.mask(str(exc))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("kcompact: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `kcompact dump | head`: the reader has what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except Exception:  # noqa: BLE001 (unexpected: the whole story, but never a credential)
        print(redaction.mask(traceback.format_exc()), file=sys.stderr)
        return 1


def _read_config_file(args: argparse.Namespace, argv: list[str]) -> None:
    from streaming.cli import config_file  # noqa: PLC0415

    given = {a.dest for a in args.subparser._actions for opt in a.option_strings  # noqa: SLF001
             for token in argv if token == opt or token.startswith(opt + "=")}
    config_file.merge(args, given, config_file.read(args.config_file, args.subparser))
