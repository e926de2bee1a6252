"""`kcompact run`: its options, and the start-up sequence: checks that read (the arguments, the state dir,
the clusters, the ACLs) before anything is created anywhere; then the sink topics, the state dir and the job."""

from __future__ import annotations

import argparse
import logging
import re
import sys
from typing import TYPE_CHECKING, Any, Sequence

from streaming.configuration import config_providers
from streaming.runtime import logging_setup
from streaming.security import redaction
from streaming.cli import acls
from streaming.cli.pairs import setting_origins, sink_settings
from streaming.errors import UsageError
from streaming.names import names_text
from streaming.job.options import RunOptions
from streaming.configuration.subscription import subscription_of
from streaming.configuration.settings import RUN_OPTIONS, Type

if TYPE_CHECKING:  # types only: --help, status and dump load neither a Kafka client nor the cleaner
    from streaming.cleaner import Overrides
    from streaming.kafka.admin import Cluster

log = logging.getLogger("kcompact")

CONNECT_TIMEOUT_S = 30.0  # the longest wait for a cluster to answer at start
LATE_FIRST_EMISSION_MS = 3_600_000  # a continuous run warns when records may wait longer than this for the sink
PAIRS_WITH_SECRETS = ("kafka", "sink.kafka", "spark.conf")


def add_parsers(sub) -> None:
    """Every option of `run` from the settings table's run scope: a flag's absence leaves the table's default,
    so the command line, --config-file and the defaults merge in one place (RunOptions)."""
    p = sub.add_parser("run", help="compact source topics into sink topics", allow_abbrev=False,
                       argument_default=argparse.SUPPRESS)
    for option in RUN_OPTIONS.values():
        shown = "" if option.default in (None, False, (), {}) else f" (default: {option.render(option.default)})"
        needs = f"; only with {RUN_OPTIONS[option.needs].flag}" if option.needs else ""
        required = " (required)" if option.required else ""
        text = (option.doc + required + needs + shown).replace("%", "%%")
        if option.type is Type.BOOLEAN:
            p.add_argument(option.flag, dest=option.attr, action="store_true", help=text)
        else:
            repeatable = option.type in (Type.NAMES, Type.PAIRS)
            p.add_argument(option.flag, dest=option.attr, action="append" if repeatable else "store",
                           metavar=option.metavar, help=text)
    p.set_defaults(func=_cmd_run)


def run_options(args: argparse.Namespace) -> RunOptions:
    """The command line over --config-file over the table's defaults, typed and checked once."""
    from streaming.cli import config_file  # noqa: PLC0415
    from streaming.cli.security import warn_secrets_on_command_line  # noqa: PLC0415
    from streaming.job.progress import ProgressDisplay  # noqa: PLC0415

    given = {o.name: getattr(args, o.attr) for o in RUN_OPTIONS.values() if hasattr(args, o.attr)}
    warn_secrets_on_command_line({RUN_OPTIONS[name].flag: given.get(name, ()) for name in PAIRS_WITH_SECRETS})
    values: dict[str, Any] = {}
    for name, raw in given.items():
        try:
            values[name] = RUN_OPTIONS[name].value_of(raw)
        except ValueError as exc:
            raise UsageError(f"{RUN_OPTIONS[name].flag}: {exc}") from None
    path = values.get("config.file")
    from_file = config_file.read(path) if path else {}
    origins = config_file.origins(path, from_file) if path else {}
    merged = {**from_file, **values}
    for name in from_file.keys() & values.keys():
        if RUN_OPTIONS[name].type is Type.PAIRS:  # key by key, the command line's winning
            merged[name] = {**from_file[name], **values[name]}
            origins[name] = {k: v for k, v in origins[name].items() if k not in values[name]}
    return RunOptions.of(merged, live_progress=ProgressDisplay.wanted_live(args.log_format), origins=origins)


def _cmd_run(args: argparse.Namespace) -> int:
    from streaming.cli import config_file  # noqa: PLC0415
    from streaming.job.topics import SinkNaming  # noqa: PLC0415
    from streaming.cleaner import KeylessPolicy, Overrides  # noqa: PLC0415

    options = run_options(args)
    overrides = Overrides.parse(options.config)  # before any cluster is contacted
    if overrides.job.keyless_policy is KeylessPolicy.DEAD_LETTER and not options.dead_letter_topic:
        raise UsageError("compaction.keyless.policy=dead-letter needs --dead-letter-topic")
    source_kafka = dict(options.kafka)
    sink_kafka = sink_settings(source_kafka, options.sink_kafka, same_cluster=not options.sink_bootstrap_servers)
    redaction.register([source_kafka, sink_kafka])
    if options.print_config:
        print(redaction.mask(config_file.render(options)), end="")
        return 0
    for option in options.missing():
        raise UsageError(f"{option.flag} is required (or {option.name} in --config-file)")
    if str(options.spark_conf.get("spark.speculation", "false")).strip().lower() == "true":
        raise UsageError("--spark-conf spark.speculation=true: a speculative copy of a compaction task that Spark "
                         "stops may still write to the sink after the next stage began; leave it off")
    for settings in (source_kafka, sink_kafka, options.spark_conf):  # a missing secret file is one line now
        redaction.register_values(config_providers.resolve_all(settings)[k]
                                  for k in config_providers.referenced(settings))
    subscription = subscription_of(options.source_topic, options.source_topic_pattern)
    if options.print_acls:
        naming = SinkNaming.of(options.sink_topic, options.sink_topic_template, subscription)
        return acls.print_acls(options, subscription, naming, source_kafka, sink_kafka)
    return start(args, options, overrides, source_kafka, sink_kafka)


def start(args: argparse.Namespace, options: RunOptions, overrides: Overrides, source_kafka: dict,
          sink_kafka: dict, locked: bool = False) -> int:
    """Checks that read (the state dir, then the clusters) before anything is created anywhere; then the
    sink topics, the state dir and the Spark session."""
    from streaming.job.metrics import serve as serve_metrics  # noqa: PLC0415
    from streaming.job.options import Schedules  # noqa: PLC0415
    from streaming.job.runner import CompactorJob  # noqa: PLC0415
    from streaming.job.spec import JobMapping, JobSpec, check_state_dir_mapping, job_id_of  # noqa: PLC0415
    from streaming.job.topics import SinkNaming, TopicSync  # noqa: PLC0415
    from streaming.cli.security import spark_settings, warn_if_readable_by_others  # noqa: PLC0415
    from streaming.disaster.mark import refuse_old_direction, switched_meanwhile  # noqa: PLC0415
    from streaming.kafka import native  # noqa: PLC0415
    from streaming.kafka.admin import Cluster  # noqa: PLC0415
    from streaming.kafka.permissions import AccessCheck, JobAccess  # noqa: PLC0415
    from streaming.spark.driver import SparkEngine  # noqa: PLC0415
    from streaming.spark.session import build_session  # noqa: PLC0415
    from streaming.state.locks import StateDirLock  # noqa: PLC0415
    from streaming.security.private_files import private_files  # noqa: PLC0415
    from streaming.state.stores import check_access, open_state_dir  # noqa: PLC0415

    sink_bootstrap = options.sink_bootstrap_servers or options.bootstrap_servers
    subscription = subscription_of(options.source_topic, options.source_topic_pattern)
    table_sync = _table_sync_schedule(options, subscription.names)
    naming = SinkNaming.of(options.sink_topic, options.sink_topic_template, subscription)
    starting = options.starting(subscription)
    group_pattern = _group_sync_pattern(options)
    mapping = JobMapping(options.bootstrap_servers, subscription, sink_bootstrap, naming.template)
    state = open_state_dir(options.state_dir)
    check_access(state, write=True)
    check_state_dir_mapping(state, mapping)
    refuse_old_direction(state, options.force)
    warn_if_readable_by_others(state.root if state.local else None, "--state-dir")
    warn_if_readable_by_others(options.checkpoint_location, "--checkpoint-location")

    wait = min(CONNECT_TIMEOUT_S, options.retry_timeout)
    source_origins, sink_origins = setting_origins(options.origins, same_cluster=not options.sink_bootstrap_servers)
    source = Cluster("source", options.bootstrap_servers, source_kafka, connect_timeout_s=wait, origins=source_origins)
    sink = Cluster("sink", sink_bootstrap, sink_kafka, connect_timeout_s=wait, origins=sink_origins)
    sync = TopicSync(source, sink, subscription, naming, overrides, dict(options.sink_topic_config),
                     options.dead_letter_topic)
    permissions = AccessCheck(source, sink)  # both clusters have answered and accepted the login
    permissions.named_source_topics(subscription.names)
    group_sync = None if group_pattern is None else _group_sync_schedule(options, group_pattern, source, sink)
    present = sync.present()
    if not present:
        if options.once:
            raise UsageError(f"no topic on the source cluster matches --source-topic-pattern "
                             f"'{subscription.pattern}'; nothing to do")
        log.warning("no topic on the source cluster matches --source-topic-pattern '%s' yet; waiting for one",
                    subscription.pattern)
    sync.refuse_sinks(present)
    access = JobAccess(tuple(sorted(present)), tuple(naming.sink_of(t) for t in sorted(present)),
                       options.dead_letter_topic, _synced_groups(group_pattern, group_sync), options.sync_topic_acls,
                       sync.same_cluster)
    permissions.before_creating(access)
    sync.check_starting_offsets(starting, present)
    plans = sync.sync({})
    permissions.after_creating(access)
    lock = None if locked else StateDirLock(state)  # ``locked``: a promote runs the job under its own
    try:
        # the state dir and a --snapshot-every table are copies of the mirrored data
        with private_files():
            spec = JobSpec(mapping, options.state_dir, plans, source_kafka=source_kafka, sink_kafka=sink_kafka,
                           settings=overrides.job, dead_letter_topic=options.dead_letter_topic,
                           dead_letter_max_message_bytes=sync.dead_letter_max_message_bytes,
                           trigger_interval_ms=round(options.trigger_interval * 1000),
                           kafka_native=options.native_asked,
                           source_cluster_id=source.cluster_id(), sink_cluster_id=sink.cluster_id(),
                           job_id=job_id_of(state), config=dict(options.config))
            _print_plans(spec, source_kafka, sink_kafka)
            native.announce(spec.kafka_native)
            if not options.once:
                _warn_of_late_first_emission(spec)
            spec.save(state)
            public_conf, secret_conf = spark_settings(options.spark_conf)
            extra = {**logging_setup.for_workers(args.log_level, args.log_format), **public_conf}
            engine = SparkEngine(lambda: build_session("kcompact", master=options.spark_master, log_level=args.log_level,
                                                       extra=extra, secret=secret_conf))  # started when first needed
            schedules = Schedules(group_sync, _acl_sync_schedule(options, source, sink), table_sync,
                                  switched=lambda: switched_meanwhile(state))
            job = CompactorJob(engine, spec, options, sync, schedules)
            if options.metrics_port is not None:
                serve_metrics(job.collector, options.metrics_port, options.metrics_host)
                log.info("Prometheus metrics on http://%s:%d/metrics", options.metrics_host, options.metrics_port)
            return job.run()
    finally:
        if lock is not None:
            lock.release()


def _group_sync_pattern(options: RunOptions) -> re.Pattern[str] | None:
    return None if options.sync_group_offsets is None else re.compile(options.sync_group_offsets)


def _group_sync_schedule(options: RunOptions, pattern: re.Pattern[str], source: Cluster, sink: Cluster):
    """The job's group offset sync, on the clusters the job itself uses."""
    from streaming.job.group_sync import GroupSyncSchedule  # noqa: PLC0415
    from streaming.kafka.group_sync import GroupOffsetSync, GroupSyncTotals  # noqa: PLC0415

    syncer = GroupOffsetSync(source, sink, pattern, options.sync_group_offsets_allow_rewind)
    return GroupSyncSchedule(syncer, options.sync_group_offsets_interval, GroupSyncTotals())


def _synced_groups(pattern: re.Pattern[str] | None, schedule) -> tuple[str, ...]:
    """The groups whose ACLs the start can check: those the pattern names literally, and those the source
    lists to the principal now (a group it may not describe is not listed to it)."""
    if pattern is None:
        return ()
    literal = (pattern.pattern,) if re.escape(pattern.pattern).replace("\\-", "-") == pattern.pattern else ()
    return tuple(sorted({*literal, *schedule.syncer.groups()}))


def _table_sync_schedule(options: RunOptions, topics: Sequence[str]):
    """The tables' schedule, checked before the job starts: a table name without a template that would take
    several listed topics' columns is refused here (a pattern's topics are checked at each snapshot)."""
    if options.snapshot_every is None:
        return None
    from streaming.configuration.output_names import namespace_table_problem  # noqa: PLC0415
    from streaming.iceberg import require  # noqa: PLC0415
    from streaming.iceberg.schedule import TableSyncSchedule  # noqa: PLC0415
    from streaming.configuration.output_names import OutputName  # noqa: PLC0415
    from streaming.table.values import FromSchema, ValueFormat, ValueSpec  # noqa: PLC0415

    require()  # before the job starts: a missing pyiceberg is one line, not a warning per stage
    name = OutputName(options.iceberg_table, "--iceberg-table", namespace_table_problem)
    values = ValueSpec(ValueFormat(options.snapshot_value_format or "binary"), options.snapshot_json_null_deletes,
                       FromSchema(options.snapshot_from_schema or "all"))
    name.of(topics, values.columns_from_values, options.snapshot_one_table)
    return TableSyncSchedule(name, options.iceberg_catalog, options.iceberg_warehouse, values, options.snapshot_every,
                             options.snapshot_one_table)


def _acl_sync_schedule(options: RunOptions, source: Cluster, sink: Cluster):
    if not options.sync_topic_acls:
        return None
    from streaming.job.acl_sync import AclSyncSchedule  # noqa: PLC0415
    from streaming.kafka.acl_sync import TopicAclSync  # noqa: PLC0415

    from streaming.kafka.permissions import principal_of  # noqa: PLC0415

    mirror = frozenset(principal_of(config_providers.resolve_all(c.settings)) for c in (source, sink))
    return AclSyncSchedule(TopicAclSync(source, sink, mirror), options.sync_topic_acls_interval)


def _print_plans(spec, source_kafka: dict, sink_kafka: dict) -> None:
    """The effective configuration, topics with the same one together: the most common in full, each other
    by what it sets differently, so a whole cluster's start fits a screen (each topic's at DEBUG)."""
    from streaming.job.spec import TOPIC_SCOPES  # noqa: PLC0415

    def side(bootstrap: str, settings: dict) -> str:
        return f"{bootstrap} {redaction.redact(settings)}" if settings else bootstrap

    groups: dict[tuple, list[str]] = {}
    for topic, plan in sorted(spec.topics.items()):
        config = plan.compaction.to_kafka(TOPIC_SCOPES)
        log.debug("%s (%d partitions) -> %s; effective configuration: %s", topic, plan.partitions, plan.sink,
                  ", ".join(f"{k}={v}" for k, v in config.items()))
        groups.setdefault(tuple(config.items()), []).append(topic)
    partitions = sum(p.partitions for p in spec.topics.values())
    print(f"mirroring {len(spec.topics)} topic(s) ({partitions:,} partitions) from "
          f"{side(spec.source_bootstrap, source_kafka)} to {side(spec.sink_bootstrap, sink_kafka)}; "
          f"{', '.join(f'{k}={v}' for k, v in spec.settings.to_kafka().items())}")
    ordered = sorted(groups.items(), key=lambda g: (-len(g[1]), g[1][0]))
    for i, (config, topics) in enumerate(ordered):
        plan = spec.topics[topics[0]]
        where = f"{topics[0]} ({plan.partitions} partitions) -> {plan.sink}" if len(topics) == 1 else \
            f"{len(topics)} topics ({names_text(topics)}) -> {spec.mapping.sink_template}"
        if i == 0:
            print(f"  {where}; effective configuration:")
            for key, value in config:
                print(f"    {key}={value}")
        else:
            first = dict(ordered[0][0])
            print(f"  {where}; as above but " + ", ".join(f"{k}={v}" for k, v in config if first.get(k) != v))
    sys.stdout.flush()


def _warn_of_late_first_emission(spec) -> None:
    """Kafka's defaults hold every record in its active segment for a week: a mirror for disaster recovery
    that emits nothing for days should say so at start, not leave it to the manual; once for all the topics
    that hold records alike."""
    from streaming.cli.readable import bytes_text, duration_text  # noqa: PLC0415

    late: dict[tuple, list[str]] = {}
    for topic, plan in sorted(spec.topics.items()):
        c = plan.compaction
        if c.longest_hold_ms > LATE_FIRST_EMISSION_MS:
            late.setdefault((c.longest_hold_ms, c.segment_ms, c.max_compaction_lag_ms, c.segment_bytes), []).append(topic)
    for (hold, segment_ms, max_lag, segment_bytes), topics in late.items():
        who = f"{topics[0]}: records reach {spec.topics[topics[0]].sink}" if len(topics) == 1 else \
            f"{len(topics)} topics ({names_text(topics)}): records reach their sinks"
        log.warning("%s only once their segment is cleaned: up to %s after they arrive (segment.ms=%s, "
                    "max.compaction.lag.ms=%s) unless %s of them fill segment.bytes first; set "
                    "max.compaction.lag.ms to bound it, e.g. --config max.compaction.lag.ms=60000", who,
                    duration_text(hold), duration_text(segment_ms), duration_text(max_lag), bytes_text(segment_bytes))
