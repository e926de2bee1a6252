"""`kcompact run`: its options, and the start-up sequence: checks that read (the arguments, the state dir,
the clusters, the ACLs) before anything is created anywhere; then the sink topics, the state dir and the job."""

from __future__ import annotations

import argparse
import logging
import os
import re
import sys
from typing import TYPE_CHECKING

from streaming import config_providers, logging_setup, redaction
from streaming.cli import acls
from streaming.cli.pairs import parse_pairs, regex_option, sink_settings
from streaming.errors import UsageError
from streaming.kafka.subscription import StartingOffsets, subscription_of

if TYPE_CHECKING:  # types only: --help, status and dump load neither a Kafka client nor the cleaner
    from streaming.cleaner import Overrides
    from streaming.kafka.admin import Cluster

log = logging.getLogger("kcompact")

CONNECT_TIMEOUT_S = 30.0  # the longest wait for a cluster to answer at start
LATE_FIRST_EMISSION_MS = 3_600_000  # a continuous run warns when records may wait longer than this for the sink
REQUIRED_TO_RUN = ("bootstrap_servers", "state_dir")


def add_parsers(sub) -> None:
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


def _cmd_run(args: argparse.Namespace) -> int:
    from streaming.cli import config_file  # noqa: PLC0415
    from streaming.job.topics import SinkNaming  # noqa: PLC0415
    from streaming.cleaner import KeylessPolicy, Overrides  # noqa: PLC0415

    for dest in REQUIRED_TO_RUN:
        if not getattr(args, dest):
            raise UsageError(f"--{dest.replace('_', '-')} is required (or {config_file.key_of(dest)} in --config-file)")
    overrides = Overrides.parse(parse_pairs(args.config, "--config"))  # before any cluster is contacted
    if overrides.job.keyless_policy is KeylessPolicy.DEAD_LETTER and not args.dead_letter_topic:
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


def _start(args: argparse.Namespace, overrides: Overrides, source_kafka: dict, sink_kafka: dict, sink_topic_config: dict,
           spark_conf: dict) -> int:
    """Checks that read (the state dir, then the clusters) before anything is created anywhere; then the
    sink topics, the state dir and the Spark session."""
    from streaming.job.metrics import serve as serve_metrics  # noqa: PLC0415
    from streaming.job.progress import ProgressDisplay  # noqa: PLC0415
    from streaming.job.options import RunOptions, Schedules  # noqa: PLC0415
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
        spec = JobSpec(mapping, args.state_dir, plans, source_kafka=source_kafka, sink_kafka=sink_kafka,
                       settings=overrides.job, dead_letter_topic=args.dead_letter_topic,
                       trigger_interval_ms=round(args.trigger_interval * 1000))
        _print_plans(spec, source_kafka, sink_kafka)
        if not args.once:
            _warn_of_late_first_emission(spec)
        spec.save(state)
        public_conf, secret_conf = spark_settings(spark_conf)
        extra = {**logging_setup.for_workers(args.log_level, args.log_format), **public_conf}
        engine = SparkEngine(lambda: build_session("kcompact", master=args.spark_master, log_level=args.log_level,
                                                   extra=extra, secret=secret_conf))  # started when first needed
        options = RunOptions(args.once, args.drain, args.checkpoint_location, args.max_offsets_per_trigger, starting,
                             args.retry_timeout, args.allow_data_loss, ProgressDisplay.wanted_live(args.log_format))
        job = CompactorJob(engine, spec, options, sync, Schedules(group_sync, _acl_sync_schedule(args, source, sink)))
        if args.metrics_port is not None:
            serve_metrics(job.collector, args.metrics_port, args.metrics_host)
            log.info("Prometheus metrics on http://%s:%d/metrics", args.metrics_host, args.metrics_port)
        return job.run()
    finally:
        lock.release()
        os.umask(previous_umask)


def _group_sync_pattern(args: argparse.Namespace) -> re.Pattern[str] | None:
    """--sync-group-offsets and its options, refused in one line before any cluster is contacted."""
    if args.sync_group_offsets is None:
        if args.sync_group_offsets_allow_rewind:
            raise UsageError("--sync-group-offsets-allow-rewind needs --sync-group-offsets REGEX")
        return None
    if args.sync_group_offsets_interval <= 0:
        raise UsageError(f"--sync-group-offsets-interval must be > 0 seconds, got {args.sync_group_offsets_interval}")
    return regex_option(args.sync_group_offsets, "--sync-group-offsets")


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
    from streaming.job.spec import TOPIC_SCOPES  # noqa: PLC0415

    def side(bootstrap: str, settings: dict) -> str:
        return f"{bootstrap} {redaction.redact(settings)}" if settings else bootstrap

    print(f"mirroring {len(spec.topics)} topic(s) from {side(spec.source_bootstrap, source_kafka)} "
          f"to {side(spec.sink_bootstrap, sink_kafka)}; "
          f"{', '.join(f'{k}={v}' for k, v in spec.settings.to_kafka().items())}")
    for topic, plan in sorted(spec.topics.items()):
        print(f"  {topic} ({plan.partitions} partitions) -> {plan.sink}; effective configuration:")
        for key, value in plan.compaction.to_kafka(TOPIC_SCOPES).items():
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


def read_config_file(args: argparse.Namespace, argv: list[str]) -> None:
    from streaming.cli import config_file  # noqa: PLC0415

    given = {a.dest for a in args.subparser._actions for opt in a.option_strings  # noqa: SLF001
             for token in argv if token == opt or token.startswith(opt + "=")}
    config_file.merge(args, given, config_file.read(args.config_file, args.subparser))
