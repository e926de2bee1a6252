"""`kcompact run --config-file`: run's options and topic configs in Kafka's .properties form.

Kafka and MirrorMaker 2 users keep settings in .properties files, so kcompact reads the same form. A key
is a run option's long name with dots for dashes (``bootstrap.servers``, ``state.dir``, ``source.topic``
comma-separated, ``once=true``), a topic config under Kafka's name (``min.cleanable.dirty.ratio``), or a
prefixed client or Spark setting: ``kafka.*`` (source), ``sink.kafka.*``, ``sink.topic.config.*``,
``spark.*``. The file fills in what the command line leaves out; flags given on the command line win.
"""

from __future__ import annotations

import argparse
import difflib
import logging
from dataclasses import dataclass

from streaming import java_properties
from streaming.settings import SETTINGS
from streaming.errors import UsageError

log = logging.getLogger("kcompact")

# Prefixed keys -> the repeatable KEY=VALUE option they feed, and whether the prefix stays in the key.
PREFIXES = (("sink.topic.config.", "sink_topic_config", False), ("sink.kafka.", "sink_kafka", False),
            ("kafka.", "kafka", False), ("spark.", "spark_conf", True))
PAIRS_OPTIONS = ("config", "kafka", "sink_kafka", "sink_topic_config", "spark_conf")
NOT_IN_FILE = ("help", "config_file", "print_config", "print_acls", "func", "subparser", "command", "log_level", "log_format")


@dataclass(frozen=True)
class FileSettings:
    """What a config file sets: option values by argparse dest, and KEY=VALUE pairs by option."""

    options: dict[str, object]
    pairs: dict[str, list[str]]


def _actions(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    return {a.dest: a for a in parser._actions if a.option_strings and a.dest not in NOT_IN_FILE}  # noqa: SLF001


def key_of(dest: str) -> str:
    return dest.replace("_", ".")


def read(path: str, parser: argparse.ArgumentParser) -> FileSettings:
    try:
        with open(path, encoding="utf-8") as f:
            entries = java_properties.entries(f)
    except OSError as exc:
        raise UsageError(f"--config-file {path}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise UsageError(f"--config-file {path}: not a .properties file ({exc})") from None
    actions = _actions(parser)
    by_key = {key_of(dest): a for dest, a in actions.items() if dest not in PAIRS_OPTIONS}
    options: dict[str, object] = {}
    pairs: dict[str, list[str]] = {name: [] for name in PAIRS_OPTIONS}
    for entry in entries:
        if entry.lost_backslashes:
            log.warning("--config-file %s: %s=%s reads as %r in the .properties form (a backslash escapes the "
                        "character after it); write %s=%s if the backslashes are meant", path, entry.key,
                        entry.written, entry.value, entry.key, entry.written.replace("\\", "\\\\"))
    for key, text in {e.key: e.value for e in entries}.items():
        action = by_key.get(key)
        if action is not None:
            options[action.dest] = _value(path, key, text, action)
        elif key in SETTINGS:
            pairs["config"].append(f"{key}={text}")
        else:
            prefixed = next((p for p in PREFIXES if key.startswith(p[0])), None)
            if prefixed is None:
                nearest = difflib.get_close_matches(key, [*by_key, *SETTINGS], n=1)
                hint = (f"did you mean {nearest[0]}?" if nearest else "neither a run option (e.g. bootstrap.servers, "
                        "state.dir) nor a topic config (e.g. min.cleanable.dirty.ratio), nor kafka.*, sink.kafka.*, "
                        "sink.topic.config.* or spark.*")
                raise UsageError(f"--config-file {path}: unknown key {key!r}; {hint}")
            prefix, dest, keep = prefixed
            pairs[dest].append(f"{key if keep else key[len(prefix):]}={text}")
    return FileSettings(options, pairs)


def _value(path: str, key: str, text: str, action: argparse.Action) -> object:
    if isinstance(action, argparse._StoreTrueAction):  # noqa: SLF001
        if text.strip().lower() not in ("true", "false"):
            raise UsageError(f"--config-file {path}: {key} must be true or false, got {text!r}")
        return text.strip().lower() == "true"
    if isinstance(action, argparse._AppendAction):  # noqa: SLF001
        return [t.strip() for t in text.split(",") if t.strip()]
    convert = action.type or str
    try:
        value = convert(text.strip())
    except (ValueError, argparse.ArgumentTypeError):
        raise UsageError(f"--config-file {path}: {key} must be {getattr(convert, '__name__', 'valid')}, "
                         f"got {text!r}") from None
    if action.choices is not None and value not in action.choices:
        raise UsageError(f"--config-file {path}: {key} must be one of {', '.join(map(str, action.choices))}")
    return value


def merge(args: argparse.Namespace, given: set[str], settings: FileSettings) -> None:
    """Fill ``args`` from the file where the command line (``given``: dests set by flags) is silent; the
    KEY=VALUE options take the file's pairs first, so the command line's win on a shared key."""
    for dest, value in settings.options.items():
        if dest not in given:
            setattr(args, dest, value)
    for dest, pairs in settings.pairs.items():
        setattr(args, dest, [*pairs, *getattr(args, dest)])


def render(args: argparse.Namespace, parser: argparse.ArgumentParser) -> str:
    """The effective configuration in the file's own form: what --print-config shows, and a valid file."""
    lines = []
    for dest, action in _actions(parser).items():
        value = getattr(args, dest)
        if dest in PAIRS_OPTIONS:
            continue
        if value is None or value == [] or (value is False and isinstance(action, argparse._StoreTrueAction)):  # noqa: SLF001
            continue
        text = ",".join(value) if isinstance(value, list) else str(value).lower() if isinstance(value, bool) else value
        lines.append((key_of(dest), str(text)))
    for key_value in args.config:
        lines.append(tuple(key_value.split("=", 1)))
    for prefix, dest, keep in PREFIXES:
        for key_value in getattr(args, dest):
            key, _, value = key_value.partition("=")
            lines.append((key if keep else prefix + key, value))
    return java_properties.dumps(dict(lines))
