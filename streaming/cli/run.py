"""`kcompact run`: its options, merged from the command line, --config-file and the defaults, and the checks
that need no cluster (the print-only modes too); the job itself starts in streaming.startup."""

from __future__ import annotations

import argparse
from typing import Any

from streaming.configuration import config_providers
from streaming.security import redaction
from streaming.cli import acls
from streaming.errors import UsageError
from streaming.job.options import RunOptions
from streaming.configuration.cluster_settings import sink_settings
from streaming.configuration.subscription import subscription_of
from streaming.configuration.settings import RUN_OPTIONS, Type


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
    from streaming.startup.assembly import Launch, start  # noqa: PLC0415 (the job's modules, Spark's and Kafka's)

    return start(options, Launch(source_kafka, sink_kafka, overrides, args.log_level, args.log_format))
