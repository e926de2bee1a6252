"""The start-up sequence, in the one order every start takes: checks that read (the options, the state dir, the
clusters, the ACLs) before anything is created anywhere; then the sink topics; then, under the state dir's lock,
the saved spec, Spark and the job. A mistake found by a check leaves nothing behind on either cluster."""

from __future__ import annotations

import functools
import logging
import re
from dataclasses import dataclass, replace
from typing import Mapping

from streaming.cleaner import Overrides
from streaming.configuration.cluster_settings import setting_origins
from streaming.configuration.subscription import StartingOffsets, Subscription, subscription_of
from streaming.disaster.mark import switched_meanwhile
from streaming.errors import UsageError
from streaming.job.group_sync import GroupSyncSchedule
from streaming.job.metrics import serve as serve_metrics
from streaming.job.options import CONNECT_TIMEOUT_S, RunOptions, Schedules
from streaming.job.runner import CompactorJob
from streaming.job.spec import JobMapping, JobSpec, TopicPlan, job_id_of
from streaming.job.topics import SinkNaming, TopicSync
from streaming.kafka.access.permissions import AccessCheck, JobAccess
from streaming.kafka.admin import Cluster
from streaming.kafka.native import gate
from streaming.runtime import logging_setup
from streaming.security.private_files import private_files, warn_if_readable_by_others
from streaming.security.spark_secrets import spark_settings
from streaming.spark.driver import SparkEngine
from streaming.spark import session as spark_session
from streaming.startup import report, schedules
from streaming.startup.state_dir import checked_state_dir
from streaming.state.locks import StateDirLock
from streaming.state.stores import StateDir

log = logging.getLogger("kcompact")


@dataclass(frozen=True)
class Launch:
    """What a start is handed beside the options, as the command resolved them: the clusters' client settings,
    the --config overrides (parsed once, at the edge), the driver's log level and format (Spark's workers log
    alike)."""

    source_kafka: Mapping[str, str]
    sink_kafka: Mapping[str, str]
    overrides: Overrides
    log_level: str
    log_format: str


@dataclass(frozen=True)
class CheckedStart:
    """What the checks that read found, before anything was created: the job's topics as the options name them,
    their state dir, both clusters (which answered and accepted the login) and the syncs beside the job."""

    options: RunOptions
    subscription: Subscription
    naming: SinkNaming
    starting: StartingOffsets
    mapping: JobMapping
    state: StateDir | None  # None: the options name none (the caller holds one)
    source: Cluster
    sink: Cluster
    sync: TopicSync
    permissions: AccessCheck
    schedules: Schedules


def start(options: RunOptions, launch: Launch, held: StateDir | None = None) -> int:
    """Runs the job to its end; its exit code. ``held``: the state dir of a caller that opened and checked it and
    holds its lock (a promote runs the job in its own), and the options then name none; else the options' state
    dir is checked with the rest, and locked once the sink topics are there."""
    if (held is None) == (options.state_dir is None):
        raise ValueError("a start runs in one state dir: the options' or the one its caller holds")
    checked = check(options, launch)
    state = held
    if state is None:
        state = checked.state
    plans = create(checked)
    lock = None if held is not None else StateDirLock(state)
    try:
        with private_files():  # the state dir and a --snapshot-every table are copies of the mirrored data
            job = assemble(checked, plans, launch, state)
            if options.metrics_port is not None:
                serve_metrics(job.collector, options.metrics_port, options.metrics_host)
                log.info("Prometheus metrics on http://%s:%d/metrics", options.metrics_host, options.metrics_port)
            return job.run()
    finally:
        if lock is not None:
            lock.release()


def check(options: RunOptions, launch: Launch) -> CheckedStart:
    """The options' topics and names, then their state dir (if they name one), then the clusters, the named
    topics' ACLs and the syncs beside the job: each only read (``--force`` aside, which clears a switch's mark)."""
    subscription = subscription_of(options.source_topic, options.source_topic_pattern)
    table_sync = schedules.table_sync(options, subscription.names)
    naming = SinkNaming.of(options.sink_topic, options.sink_topic_template, subscription)
    starting = options.starting(subscription)
    sink_bootstrap = options.sink_bootstrap_servers or options.bootstrap_servers
    mapping = JobMapping(options.bootstrap_servers, subscription, sink_bootstrap, naming.template)
    state = None if options.state_dir is None else checked_state_dir(options.state_dir, mapping, options.force)
    warn_if_readable_by_others(options.checkpoint_location, "--checkpoint-location")

    wait = min(CONNECT_TIMEOUT_S, options.retry_timeout)
    source_origins, sink_origins = setting_origins(options.origins, same_cluster=not options.sink_bootstrap_servers)
    source = Cluster("source", options.bootstrap_servers, launch.source_kafka, connect_timeout_s=wait,
                     origins=source_origins)
    sink = Cluster("sink", sink_bootstrap, launch.sink_kafka, connect_timeout_s=wait, origins=sink_origins)
    sync = TopicSync(source, sink, subscription, naming, launch.overrides, dict(options.sink_topic_config),
                     options.dead_letter_topic)
    permissions = AccessCheck(source, sink)  # both clusters have answered and accepted the login
    permissions.named_source_topics(subscription.names)
    beside = schedules.for_job(options, source, sink, table_sync)
    return CheckedStart(options, subscription, naming, starting, mapping, state, source, sink, sync, permissions,
                        beside)


def create(checked: CheckedStart) -> dict[str, TopicPlan]:
    """The sink topics (and the dead-letter topic), once the ACLs the job needs are there; their plans."""
    options, sync, naming = checked.options, checked.sync, checked.naming
    present = sync.present()
    if not present:
        if options.once:
            raise UsageError(f"no topic on the source cluster matches --source-topic-pattern "
                             f"'{checked.subscription.pattern}'; nothing to do")
        log.warning("no topic on the source cluster matches --source-topic-pattern '%s' yet; waiting for one",
                    checked.subscription.pattern)
    sync.refuse_sinks(present)
    access = JobAccess(tuple(sorted(present)), tuple(naming.sink_of(t) for t in sorted(present)),
                       options.dead_letter_topic, _synced_groups(checked.schedules.group_sync),
                       options.sync_topic_acls, sync.same_cluster)
    checked.permissions.before_creating(access)
    sync.check_starting_offsets(checked.starting, present)
    plans = sync.sync({})
    checked.permissions.after_creating(access)
    return plans


def assemble(checked: CheckedStart, plans: dict[str, TopicPlan], launch: Launch, state: StateDir) -> CompactorJob:
    """The job's spec saved in its state dir, and the job on a Spark that starts when the job first needs it."""
    options = checked.options
    spec = JobSpec(checked.mapping, state.uri, plans, source_kafka=dict(launch.source_kafka),
                   sink_kafka=dict(launch.sink_kafka), settings=launch.overrides.job,
                   dead_letter_topic=options.dead_letter_topic,
                   dead_letter_max_message_bytes=checked.sync.dead_letter_max_message_bytes,
                   trigger_interval_ms=round(options.trigger_interval * 1000), kafka_native=options.native_asked,
                   source_cluster_id=checked.source.cluster_id(), sink_cluster_id=checked.sink.cluster_id(),
                   job_id=job_id_of(state), config=dict(options.config))
    report.print_plans(spec, launch.source_kafka, launch.sink_kafka)
    gate.announce(spec.kafka_native)
    if not options.once:
        report.warn_of_late_first_emission(spec)
    spec.save(state)
    public_conf, secret_conf = spark_settings(options.spark_conf)
    extra = {**logging_setup.for_workers(launch.log_level, launch.log_format), **public_conf}
    engine = SparkEngine(lambda: spark_session.build_session("kcompact", master=options.spark_master,
                                                             log_level=launch.log_level, extra=extra,
                                                             secret=secret_conf))  # started when first needed
    beside = replace(checked.schedules, switched=functools.partial(switched_meanwhile, state))  # before each stage
    return CompactorJob(engine, spec, options, checked.sync, beside)


def _synced_groups(schedule: GroupSyncSchedule | None) -> tuple[str, ...]:
    """The groups whose ACLs the start can check: those the pattern names literally, and those the source
    lists to the principal now (a group it may not describe is not listed to it)."""
    if schedule is None:
        return ()
    pattern = schedule.syncer.pattern.pattern
    literal = (pattern,) if re.escape(pattern).replace("\\-", "-") == pattern else ()
    return tuple(sorted({*literal, *schedule.syncer.groups()}))
