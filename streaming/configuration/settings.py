"""Every setting, once: its name, type, default, check, scope and meaning. The compaction settings under
Kafka's names, and `kcompact run`'s own options (scope ``run``).

Modelled on Kafka's ``ConfigDef`` (``define(name, type, default, validator, doc)``). The cleaner's config, the
log's config, the run options, the command line and its help, --config-file, --print-config, the saved spec
and docs/configuration.md all read this table, so a key has one default and one set of limits wherever it is
used.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Callable, Sequence

from streaming.configuration.subscription import StartingOffsets, SubscribePattern, regex_problem
from streaming.configuration.output_names import table_template_problem

LONG_MAX = 2**63 - 1


class Scope(str, Enum):
    TOPIC = "topic"      # a Kafka topic config: a source topic's own value is the default for its log
    CLEANER = "cleaner"  # Kafka's log.cleaner.* broker settings: one value for the job's cleaner
    JOB = "job"          # kcompact's own, set on the command line only
    RUN = "run"          # an option of kcompact run: --name-with-dashes, or its name in --config-file


class Type(str, Enum):
    LONG = "long"
    DOUBLE = "double"
    STRING = "string"
    LIST = "list"
    BOOLEAN = "boolean"  # a flag on the command line, true or false in a file
    NAMES = "names"      # repeatable on the command line, comma-separated in a file
    PAIRS = "pairs"      # KEY=VALUE, repeatable; prefixed keys in a file


@dataclass(frozen=True)
class Setting:
    name: str
    type: Type
    default: Any
    scope: Scope
    doc: str
    check: Callable[[Any], str | None] = lambda value: None  # what is wrong with a value, or None
    choices: tuple[str, ...] = ()  # for a STRING with a fixed set of values
    metavar: str | None = None  # a run option's value as its help names it
    needs: str | None = None  # a run option that means nothing unless this other one is set
    required: bool = False  # a run option without which the job cannot run
    in_file: bool = True  # a run option a --config-file may set (not --config-file itself, nor --print-*)
    file_prefix: str = ""  # PAIRS: a file writes KEY=VALUE as prefix + KEY ("": under the compaction key itself)
    prefix_in_key: bool = False  # PAIRS: the prefix is part of KEY (spark.*), not added to it

    def file_key(self, key: str) -> str:
        """How a file writes one KEY of this PAIRS option."""
        return key if self.prefix_in_key else self.file_prefix + key

    @property
    def flag(self) -> str:
        return "--" + self.name.replace(".", "-")

    @property
    def attr(self) -> str:
        """The field of a config class (and the argparse dest) that holds it."""
        return self.name.replace(".", "_")

    def parse(self, text: str) -> Any:
        """A value from its text (the command line, a topic config, the saved spec); ValueError names why."""
        text = text.strip()
        if self.type is Type.BOOLEAN:
            if text.lower() not in ("true", "false"):
                raise ValueError("must be true or false")
            return text.lower() == "true"
        if self.type is Type.NAMES:
            return tuple(dict.fromkeys(p.strip() for p in text.split(",") if p.strip()))
        if self.type is Type.LONG:
            try:
                return int(text)
            except ValueError:
                raise ValueError("not a whole number") from None
        if self.type is Type.DOUBLE:
            try:
                return float(text)
            except ValueError:
                raise ValueError("not a number") from None
        if self.type is Type.LIST:
            return ",".join(sorted(p.strip() for p in text.split(",") if p.strip()))
        if self.choices:
            return text.lower()
        return text or None

    def value_of(self, given: str | bool | Sequence[str]) -> Any:
        """A run option's value as given: a flag's True, a repeatable option's list, or the text of a file
        or a single option; ValueError names why and what was given."""
        if self.type is Type.PAIRS:
            return key_values([given] if isinstance(given, str) else given)
        if isinstance(given, bool):
            return given
        if not isinstance(given, str):
            return tuple(dict.fromkeys(name for text in given for name in self.parse(text)))
        try:
            return self.parse(given)
        except ValueError as exc:
            raise ValueError(f"{exc}, got {given!r}") from None

    def render(self, value: Any) -> str:
        """The text parse() reads back (Kafka's form)."""
        if value is None:
            return ""
        if isinstance(value, bool):
            return str(value).lower()
        if isinstance(value, tuple):
            return ",".join(value)
        return str(value.value) if isinstance(value, Enum) else str(value)

    def problem(self, value: Any) -> str | None:
        """What is wrong with a parsed value, or None."""
        if value is None:
            return None
        if self.choices and value not in self.choices:
            return f"unknown value {value!r}; one of {', '.join(self.choices)}"
        return self.check(value)


def key_values(entries: Sequence[str]) -> dict[str, str]:
    """KEY=VALUE entries as a mapping, the last of a key winning; ValueError names an entry that is not one."""
    out = {}
    for entry in entries:
        key, sep, value = entry.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"takes KEY=VALUE, got {entry!r}")
        out[key.strip()] = value
    return out


def at_least(low: int | float) -> Callable[[Any], str | None]:
    return lambda value: None if value >= low else f"must be >= {low}, got {value}"


def between(low: float, high: float, closed: bool = True) -> Callable[[Any], str | None]:
    def check(value: Any) -> str | None:
        ok = low <= value <= high if closed else low < value < high
        return None if ok else f"must be in {'[' if closed else '('}{low}, {high}{']' if closed else ')'}, got {value}"
    return check


def _positive(value: Any) -> str | None:
    return None if value > 0 else f"must be > 0, got {value}"


def _not_negative(value: Any) -> str | None:
    return None if value >= 0 else f"must be >= 0, got {value}"


def _cleanup_policy(value: str) -> str | None:
    policies = set(value.split(","))
    if policies <= {"compact", "delete"} and "compact" in policies:
        return None
    return f"must be 'compact' or 'compact,delete' for a compactor, got {value!r}"


SETTINGS: dict[str, Setting] = {s.name: s for s in (
    Setting("cleanup.policy", Type.LIST, "compact", Scope.TOPIC,
            "compact (with delete, a source's retention is its own business); anything else is refused",
            _cleanup_policy),
    Setting("segment.bytes", Type.LONG, 1_073_741_824, Scope.TOPIC,
            "the active segment rolls at this size", at_least(14)),
    Setting("segment.ms", Type.LONG, 604_800_000, Scope.TOPIC,
            "the active segment rolls at this age (or max.compaction.lag.ms, if less)", at_least(1)),
    Setting("segment.jitter.ms", Type.LONG, 0, Scope.TOPIC,
            "a random amount up to this is taken off segment.ms, per partition", at_least(0)),
    Setting("min.cleanable.dirty.ratio", Type.DOUBLE, 0.5, Scope.TOPIC,
            "a log is cleaned when its dirty bytes reach this share", between(0.0, 1.0)),
    Setting("min.compaction.lag.ms", Type.LONG, 0, Scope.TOPIC,
            "a record stays uncompacted at least this long", at_least(0)),
    Setting("max.compaction.lag.ms", Type.LONG, LONG_MAX, Scope.TOPIC,
            "a record is compacted at most this long after it was written (KIP-354)", at_least(1)),
    Setting("delete.retention.ms", Type.LONG, 86_400_000, Scope.TOPIC,
            "a tombstone is kept this long after its log was cleaned, then removed", at_least(0)),
    Setting("message.timestamp.after.max.ms", Type.LONG, 3_600_000, Scope.TOPIC,
            "a record stamped further ahead than this is timed by its append for rolls and lags", at_least(0)),
    Setting("file.delete.delay.ms", Type.LONG, 60_000, Scope.TOPIC,
            "an object no manifest needs any more is deleted after this (at the end of a run unless a reader holds the log)", at_least(0)),
    Setting("compaction.strategy", Type.STRING, "offset", Scope.TOPIC,
            "which record of a key wins: the last by offset, by timestamp, or by a version header (KIP-280)",
            choices=("offset", "timestamp", "header")),
    Setting("compaction.strategy.header", Type.STRING, None, Scope.TOPIC,
            "the version header, with compaction.strategy=header"),
    Setting("compaction.keyless.policy", Type.STRING, "drop", Scope.JOB,
            "a record without a key: dropped and counted (Kafka), sent to --dead-letter-topic, or an error",
            choices=("drop", "dead-letter", "fail")),
    Setting("erase.audit.keys", Type.STRING, "hash", Scope.JOB,
            "the erase audit (kcompact erasures) names each tombstone's key by its SHA-256, by the key itself, "
            "or keeps no audit", choices=("hash", "key", "off")),
    Setting("emit.transaction.records", Type.LONG, 1_000_000, Scope.JOB,
            "records one sink transaction holds at most; below that each holds about emit.transaction.ms of records "
            "(an emitter's first, 20,000), so a commit's round trips to the sink cluster stay a small share across "
            "a WAN and a slow link's transaction commits well within transaction.timeout.ms "
            "(docs/whole-cluster.md)", at_least(1)),
    Setting("emit.transaction.ms", Type.LONG, 2_000, Scope.JOB,
            "about how long one sink transaction lasts: each holds the records the emitter's last full "
            "transaction showed it produces in this long, up to emit.transaction.records", at_least(1)),
    Setting("log.cleaner.dedupe.buffer.size", Type.LONG, 134_217_728, Scope.CLEANER,
            "bytes of the offset map; a pass cleans as far as the keys it holds", at_least(48)),
    Setting("log.cleaner.io.buffer.load.factor", Type.DOUBLE, 0.9, Scope.CLEANER,
            "how full the offset map may get", between(0.0, 1.0, closed=False)),
    Setting("log.cleaner.io.max.bytes.per.second", Type.DOUBLE, float("inf"), Scope.CLEANER,
            "the cleaner's read and write rate, throttled", _positive),
    Setting("log.cleaner.backoff.ms", Type.LONG, 15_000, Scope.CLEANER,
            "the wait before an uncleanable partition is tried again", at_least(0)),
)}


def _starting_offsets(value: str) -> str | None:
    try:
        StartingOffsets.parse(value, SubscribePattern(".*"), option="")
    except ValueError as exc:
        return str(exc).strip()
    return None


SECONDS = "SECONDS"
KEY_VALUE = "KEY=VALUE"

RUN_OPTIONS: dict[str, Setting] = {s.name: s for s in (
    Setting("config.file", Type.STRING, None, Scope.RUN,
            "run's options and topic configs in Kafka's .properties form (bootstrap.servers=..., state.dir=..., "
            "min.cleanable.dirty.ratio=..., kafka.*, sink.kafka.*, spark.*); command-line flags win",
            metavar="FILE", in_file=False),
    Setting("print.config", Type.BOOLEAN, False, Scope.RUN,
            "print the effective configuration (command line over --config-file) and exit", in_file=False),
    Setting("print.acls", Type.BOOLEAN, False, Scope.RUN,
            "print the ACLs the job's principal needs, as kafka-acls.sh commands, and exit (a dry run: with "
            "--apply they are added)", in_file=False),
    Setting("apply", Type.BOOLEAN, False, Scope.RUN,
            "add the ACLs --print-acls lists that each cluster lacks, through the admin API, logged in with "
            "--admin-config; ACLs already there are left as they are, so running it again adds nothing",
            in_file=False, needs="print.acls"),
    Setting("admin.config", Type.STRING, None, Scope.RUN,
            "an admin's client properties, as kafka-acls.sh --command-config takes them (Java's form: "
            "sasl.jaas.config, a PEM truststore; or librdkafka's keys): the printed commands name the file, and "
            "--apply logs in with it", metavar="FILE", in_file=False, needs="print.acls"),
    Setting("sink.admin.config", Type.STRING, None, Scope.RUN,
            "the sink cluster's admin client properties, when its admin is not --admin-config's",
            metavar="FILE", in_file=False, needs="print.acls"),
    Setting("bootstrap.servers", Type.STRING, None, Scope.RUN, "source cluster", required=True),
    Setting("source.topic", Type.NAMES, (), Scope.RUN, "a source topic (repeatable)", metavar="TOPIC"),
    Setting("source.topic.pattern", Type.STRING, None, Scope.RUN,
            "every source topic the regular expression matches whole, topics created later included", regex_problem,
            metavar="REGEX"),
    Setting("sink.topic", Type.STRING, None, Scope.RUN, "the sink topic, for one --source-topic"),
    Setting("sink.topic.template", Type.STRING, None, Scope.RUN,
            "each source topic's sink, with {topic} for the source topic's name, e.g. '{topic}.compacted'",
            metavar="TEMPLATE"),
    Setting("state.dir", Type.STRING, None, Scope.RUN, "where the partition logs and the job's state live",
            required=True),
    Setting("sink.bootstrap.servers", Type.STRING, None, Scope.RUN, "sink cluster (none: the source cluster)"),
    Setting("config", Type.PAIRS, {}, Scope.RUN,
            "compaction setting under Kafka's name (overrides what the source topic sets)", metavar=KEY_VALUE),
    Setting("kafka", Type.PAIRS, {}, Scope.RUN,
            "librdkafka setting for the source side (security.protocol, sasl.*, ssl.*)", metavar=KEY_VALUE, file_prefix="kafka."),
    Setting("sink.kafka", Type.PAIRS, {}, Scope.RUN,
            "librdkafka setting for the sink side (on one cluster, --kafka's apply first)", metavar=KEY_VALUE, file_prefix="sink.kafka."),
    Setting("sink.topic.config", Type.PAIRS, {}, Scope.RUN,
            "topic config when the sink topic is created (cleanup.policy=compact always)", metavar=KEY_VALUE, file_prefix="sink.topic.config."),
    Setting("dead.letter.topic", Type.STRING, None, Scope.RUN,
            "where keyless records go with compaction.keyless.policy=dead-letter"),
    Setting("checkpoint.location", Type.STRING, None, Scope.RUN, "Spark checkpoint (none: STATE_DIR/checkpoint)"),
    Setting("trigger.interval", Type.DOUBLE, 5.0, Scope.RUN,
            "time between micro-batches; also how often an idle job cleans and emits", _positive, metavar=SECONDS),
    Setting("max.offsets.per.trigger", Type.LONG, None, Scope.RUN,
            "records read per micro-batch at most, over all partitions (none: all available)", _positive,
            metavar="N"),
    Setting("starting.offsets", Type.STRING, "earliest", Scope.RUN,
            "where a new job starts reading: earliest, latest, or JSON like '{\"topic\":{\"0\":23,\"1\":-2}}' "
            "(-2 earliest, -1 latest) naming every partition; ignored once the job has a checkpoint",
            _starting_offsets),
    Setting("allow.data.loss", Type.BOOLEAN, False, Scope.RUN,
            "go on from the log start when source records were deleted (retention) before the job read them "
            "(false: stop, naming the partition and the lost offsets)"),
    Setting("kafka.native", Type.STRING, "on", Scope.RUN,
            "records move between librdkafka and the job's columns in kcompact's C extension, where this "
            "confluent-kafka is a version it was tested with (else the plain path, said in one WARNING); off: "
            "confluent-kafka's own per-record calls, slower", choices=("on", "off")),
    Setting("metrics.port", Type.LONG, None, Scope.RUN,
            "serve Prometheus metrics on this port (none: no endpoint; metrics.json is always written)",
            between(1, 65535)),
    Setting("metrics.host", Type.STRING, "0.0.0.0", Scope.RUN, "address the metrics endpoint binds"),
    Setting("retry.timeout", Type.DOUBLE, 300.0, Scope.RUN,
            "how long to keep retrying while a cluster is unreachable, counted from the last progress, before "
            "the job gives up; at start, each cluster is waited for this long, at most 30 s", _positive,
            metavar=SECONDS),
    Setting("spark.master", Type.STRING, None, Scope.RUN, "Spark master (none: local[2] or $KCOMPACT_SPARK_MASTER)"),
    Setting("spark.conf", Type.PAIRS, {}, Scope.RUN,
            "Spark setting (repeatable), e.g. spark.jars.packages=org.apache.hadoop:hadoop-aws:3.4.1 or "
            "spark.executor.memory=4g", metavar=KEY_VALUE, file_prefix="spark.", prefix_in_key=True),
    Setting("once", Type.BOOLEAN, False, Scope.RUN, "ingest what is there now, clean at the current time, emit, exit"),
    Setting("drain", Type.BOOLEAN, False, Scope.RUN,
            "roll every active segment after ingesting, so everything not held back by min.compaction.lag.ms is "
            "cleaned and emitted (a one-shot compaction of a topic; a continuous run rolls segments by "
            "segment.ms and max.compaction.lag.ms)", needs="once"),
    Setting("force", Type.BOOLEAN, False, Scope.RUN,
            "run a job that kcompact promote or failover switched away from in its old direction again (its "
            "mark is cleared; see docs/disaster-recovery.md)"),
    Setting("sync.group.offsets", Type.STRING, None, Scope.RUN,
            "commit, for each source consumer group the expression matches whole, its offsets on the mirrored "
            "topics translated exactly to the sink topics, on the sink cluster", regex_problem, metavar="REGEX"),
    Setting("sync.group.offsets.interval", Type.DOUBLE, 30.0, Scope.RUN, "time between two group offset syncs",
            _positive, metavar=SECONDS),
    Setting("sync.group.offsets.allow.rewind", Type.BOOLEAN, False, Scope.RUN,
            "let a sync move a sink group's offset back", needs="sync.group.offsets"),
    Setting("sync.topic.acls", Type.BOOLEAN, False, Scope.RUN,
            "copy each mirrored topic's ALLOW READ/DESCRIBE ACLs (ALL as READ) to its sink topic, at start and "
            "every interval, as MirrorMaker 2 does; WRITE is never copied"),
    Setting("sync.topic.acls.interval", Type.DOUBLE, 600.0, Scope.RUN, "time between two topic ACL syncs",
            _positive, metavar=SECONDS),
    Setting("snapshot.every", Type.DOUBLE, None, Scope.RUN,
            "keep the Iceberg table --iceberg-table in step with the compacted state: after an emission, once this "
            "long has passed since the last snapshot (0: after every emission), from the state dir, not a second "
            "read of Kafka", _not_negative, metavar=SECONDS),
    Setting("iceberg.table", Type.STRING, None, Scope.RUN,
            "the Iceberg table of the compacted state, NAMESPACE.TABLE, or one per topic named by a template: "
            "{table} and {schema} are the topic's last two dot-separated parts (Debezium's PREFIX.SCHEMA.TABLE), "
            "{topic} its whole name (shop.{table}); each snapshot upserts the keys that changed and deletes the "
            "tombstoned ones, in one commit", table_template_problem,
            metavar="NAMESPACE.TABLE", needs="snapshot.every"),
    Setting("iceberg.catalog", Type.STRING, None, Scope.RUN,
            "the table's catalog: a SQL database URI (sqlite:///PATH, postgresql://...) or http(s):// for a REST "
            "catalog (none: SQLite in ./kcompact-iceberg)", metavar="URI", needs="iceberg.table"),
    Setting("iceberg.warehouse", Type.STRING, None, Scope.RUN,
            "where the table's data files go: a directory or an object store URI (none: beside a SQLite "
            "catalog; a REST catalog chooses)", metavar="URI", needs="iceberg.table"),
    Setting("snapshot.value.format", Type.STRING, None, Scope.RUN,
            "the table's value column: binary (the bytes; none means this), string (UTF-8 text), json (objects "
            "as a struct column, the schema inferred by the first snapshot, then evolved) or debezium (a change "
            "stream as the database table's typed columns, docs/cdc.md)",
            choices=("binary", "string", "json", "debezium"), needs="iceberg.table"),
    Setting("snapshot.json.null.deletes", Type.BOOLEAN, False, Scope.RUN,
            "read a value that is JSON null as a delete of its key (Debezium's ExtractNewRecordState writes a "
            "delete so), not as an error", needs="snapshot.value.format"),
    Setting("snapshot.from.schema", Type.STRING, None, Scope.RUN,
            "with debezium values: all (every Connect schema version's columns; a type may only widen) or latest "
            "(the newest schema's columns, older rows' values converted where nothing is lost: the way out of a "
            "type change, into a new table); none means all", choices=("all", "latest"), needs="snapshot.value.format"),
    Setting("snapshot.one.table", Type.BOOLEAN, False, Scope.RUN,
            "let one table without a {table} or {topic} template take the json or debezium values of several "
            "topics, their columns merged", needs="iceberg.table"),
)}


def setting_field(name: str) -> Any:
    """A config dataclass's field holding setting ``name``: the table's default, and the name in its metadata
    (the field's key when parsing, rendering and checking)."""
    setting = SETTINGS.get(name) or RUN_OPTIONS[name]
    if isinstance(setting.default, dict):
        return field(default_factory=dict, metadata={"setting": name})
    return field(default=setting.default, metadata={"setting": name})


def _cell(s: Setting) -> str:
    return f"`{s.render(s.default)}`" if s.default not in (None, (), {}) else "(none)"


def markdown_table() -> str:
    """The settings in docs/configuration.md."""
    rows = ["| key | scope | type | default | meaning |", "|---|---|---|---|---|"]
    bar = " \\| "  # a | inside a table cell
    for s in SETTINGS.values():
        values = f" ({bar.join(s.choices)})" if s.choices else ""
        rows.append(f"| `{s.name}` | {s.scope.value} | {s.type.value}{values} | {_cell(s)} | {s.doc} |")
    return "\n".join(rows)


def run_options_table() -> str:
    """The run options in docs/configuration.md: each one's flag and --config-file key."""
    rows = ["| option | in --config-file | type | default | meaning |", "|---|---|---|---|---|"]
    for s in RUN_OPTIONS.values():
        value = "" if s.type is Type.BOOLEAN else f" {s.metavar or s.attr.upper()}"
        key = f"`{s.name}`" if s.in_file else "no"
        if s.type is Type.PAIRS:
            key = f"`{s.file_prefix}*`, the key itself" if s.prefix_in_key else \
                f"`{s.file_key('KEY')}`" if s.file_prefix else "`KEY`, a setting's own name"
        needs = f"; only with {RUN_OPTIONS[s.needs].flag}" if s.needs else ""
        default = "required" if s.required else _cell(s)
        rows.append(f"| `{s.flag}{value}` | {key} | {s.type.value} | {default} | {s.doc}{needs} |")
    return "\n".join(rows)


if __name__ == "__main__":
    print(markdown_table(), run_options_table(), sep="\n\n")
