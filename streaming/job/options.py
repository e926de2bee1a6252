"""How one run of the job goes, given once at start and handed down whole: every option of `kcompact run`
(the table's run scope, one field each, with the table's default and check) and the schedules beside it."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, Callable, Mapping, Protocol

from streaming.errors import UsageError
from streaming.configuration.subscription import StartingOffsets, Subscription
from streaming.configuration.settings import RUN_OPTIONS, Setting, setting_field as _option

if TYPE_CHECKING:  # the schedules hold Kafka clients; the options are read by commands that load none
    from streaming.job.acl_sync import AclSyncSchedule
    from streaming.job.group_sync import GroupSyncSchedule
    from streaming.job.metrics import TableState

CONNECT_TIMEOUT_S = 30.0  # the longest wait for a cluster to answer at start (or --retry-timeout, if shorter)


@dataclass(frozen=True)
class RunOptions:
    config_file: str | None = _option("config.file")
    print_config: bool = _option("print.config")
    print_acls: bool = _option("print.acls")
    apply: bool = _option("apply")
    admin_config: str | None = _option("admin.config")
    sink_admin_config: str | None = _option("sink.admin.config")
    bootstrap_servers: str | None = _option("bootstrap.servers")
    source_topic: tuple[str, ...] = _option("source.topic")
    source_topic_pattern: str | None = _option("source.topic.pattern")
    sink_topic: str | None = _option("sink.topic")
    sink_topic_template: str | None = _option("sink.topic.template")
    state_dir: str | None = _option("state.dir")
    sink_bootstrap_servers: str | None = _option("sink.bootstrap.servers")
    config: Mapping[str, str] = _option("config")
    kafka: Mapping[str, str] = _option("kafka")
    sink_kafka: Mapping[str, str] = _option("sink.kafka")
    sink_topic_config: Mapping[str, str] = _option("sink.topic.config")
    dead_letter_topic: str | None = _option("dead.letter.topic")
    checkpoint_location: str | None = _option("checkpoint.location")  # None: the state dir's own
    trigger_interval: float = _option("trigger.interval")
    max_offsets_per_trigger: int | None = _option("max.offsets.per.trigger")
    starting_offsets: str = _option("starting.offsets")
    allow_data_loss: bool = _option("allow.data.loss")
    kafka_native: str = _option("kafka.native")
    metrics_port: int | None = _option("metrics.port")
    metrics_host: str = _option("metrics.host")
    retry_timeout: float = _option("retry.timeout")  # seconds a cluster that is away is waited for
    spark_master: str | None = _option("spark.master")
    spark_conf: Mapping[str, str] = _option("spark.conf")
    once: bool = _option("once")  # read what is there now, then end (Spark's availableNow)
    drain: bool = _option("drain")  # with once: roll every active segment before the last stage
    force: bool = _option("force")  # run a job that was switched away from (streaming.disaster.mark)
    sync_group_offsets: str | None = _option("sync.group.offsets")
    sync_group_offsets_interval: float = _option("sync.group.offsets.interval")
    sync_group_offsets_allow_rewind: bool = _option("sync.group.offsets.allow.rewind")
    sync_topic_acls: bool = _option("sync.topic.acls")
    sync_topic_acls_interval: float = _option("sync.topic.acls.interval")
    snapshot_every: float | None = _option("snapshot.every")
    iceberg_table: str | None = _option("iceberg.table")
    iceberg_catalog: str | None = _option("iceberg.catalog")
    iceberg_warehouse: str | None = _option("iceberg.warehouse")
    snapshot_value_format: str | None = _option("snapshot.value.format")
    snapshot_json_null_deletes: bool = _option("snapshot.json.null.deletes")
    snapshot_from_schema: str | None = _option("snapshot.from.schema")
    snapshot_one_table: bool = _option("snapshot.one.table")
    live_progress: bool = field(default=False, compare=False)  # not an option: the log format decides it
    # Not an option: where --config-file gave a KEY=VALUE option's keys, by option name and key, as written
    # there ("kafka.sasl.password in job.properties"), for errors that name them (those absent: the flag).
    origins: Mapping[str, Mapping[str, str]] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        """Every value against the table's check, and each option that needs another with it, in one line
        naming the flag: whether it came from the command line or a file, this is the one place it is checked."""
        for option in RUN_OPTIONS.values():
            value = getattr(self, option.attr)
            problem = option.problem(value)
            if problem:
                raise UsageError(f"{option.flag}: {problem}")
            if option.needs and _given(value) and not _given(getattr(self, RUN_OPTIONS[option.needs].attr)):
                raise UsageError(f"{option.flag} is only for {RUN_OPTIONS[option.needs].flag}")
        if self.snapshot_every is not None and not self.iceberg_table:
            raise UsageError(f"{RUN_OPTIONS['snapshot.every'].flag} needs {RUN_OPTIONS['iceberg.table'].flag}, the "
                             f"table to keep in step")

    @classmethod
    def of(cls, values: Mapping[str, Any], **derived: Any) -> "RunOptions":
        """From typed values by option name (what is not given keeps the table's default)."""
        return cls(**{RUN_OPTIONS[name].attr: value for name, value in values.items()}, **derived)

    def missing(self) -> list[Setting]:
        """The required options not given: a run cannot start without them (printing its config can)."""
        return [o for o in RUN_OPTIONS.values() if o.required and getattr(self, o.attr) is None]

    def values(self) -> dict[str, Any]:
        """Typed values by option name: what --print-config renders."""
        return {f.metadata["setting"]: getattr(self, f.name) for f in fields(self) if "setting" in f.metadata}

    @property
    def native_asked(self) -> bool:
        """--kafka-native on: records take the native path where it can run (streaming.kafka.native.gate)."""
        return self.kafka_native == "on"

    def starting(self, subscription: Subscription) -> StartingOffsets:
        return StartingOffsets.parse(self.starting_offsets, subscription)


class TableSync(Protocol):
    """What the job asks of a table kept in step with its state (streaming.iceberg.schedule): a look after
    each compaction stage, and a last snapshot when the run ends."""

    def after_stage(self, state_dir: str, topics: frozenset[str]) -> None: ...

    def finish(self, state_dir: str, topics: frozenset[str]) -> None: ...

    def states(self) -> tuple[TableState, ...]: ...


def _given(value: Any) -> bool:
    """An option set to something: 0 is a value (--snapshot-every 0), an empty or false one is not."""
    return value is not None and value is not False and value not in ((), {})


@dataclass(frozen=True)
class Schedules:
    """The syncs that run beside the job on the driver, each on its own interval; None: not asked for. The
    table sync runs after a compaction stage instead, on the state it left; the switch check before each stage
    (what to stop with when a promote or a failover marked the state dir meanwhile, or None)."""

    group_sync: GroupSyncSchedule | None = None
    acl_sync: AclSyncSchedule | None = None
    table_sync: TableSync | None = None
    switched: Callable[[], str | None] | None = None
