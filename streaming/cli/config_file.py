"""`kcompact run --config-file`: run's options and topic configs in Kafka's .properties form.

Kafka and MirrorMaker 2 users keep settings in .properties files, so kcompact reads the same form. A key is
a run option's name from the settings table (``bootstrap.servers``, ``state.dir``, ``source.topic``
comma-separated, ``once=true``), a compaction setting under Kafka's name (``min.cleanable.dirty.ratio``), or a
prefixed client or Spark setting (each KEY=VALUE option's ``file_prefix``: ``kafka.*``, ``sink.kafka.*``,
``sink.topic.config.*``, ``spark.*``). The file fills in what the command line leaves out.
"""

from __future__ import annotations

import difflib
import logging
from typing import Any, Mapping

from streaming.configuration import java_properties
from streaming.errors import UsageError
from streaming.job.options import RunOptions
from streaming.configuration.settings import RUN_OPTIONS, SETTINGS, Type

log = logging.getLogger("kcompact")

IN_FILE = {o.name: o for o in RUN_OPTIONS.values() if o.in_file and o.type is not Type.PAIRS}
PREFIXED = sorted((o for o in RUN_OPTIONS.values() if o.type is Type.PAIRS and o.file_prefix),
                  key=lambda o: -len(o.file_prefix))  # sink.kafka.* before kafka.*
CONFIG = "config"  # the KEY=VALUE option a compaction setting's own name feeds


def read(path: str) -> dict[str, Any]:
    """The run options the file sets, typed, by name; each KEY=VALUE option's as a mapping."""
    try:
        with open(path, encoding="utf-8") as f:
            entries = java_properties.entries(f)
    except OSError as exc:
        raise UsageError(f"--config-file {path}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise UsageError(f"--config-file {path}: not a .properties file ({exc})") from None
    for entry in entries:
        if entry.lost_backslashes:
            log.warning("--config-file %s: %s=%s reads as %r in the .properties form (a backslash escapes the "
                        "character after it); write %s=%s if the backslashes are meant", path, entry.key,
                        entry.written, entry.value, entry.key, entry.written.replace("\\", "\\\\"))
    values: dict[str, Any] = {}
    for key, text in {e.key: e.value for e in entries}.items():
        option = IN_FILE.get(key)
        if option is not None:
            try:
                values[key] = option.value_of(text)
            except ValueError as exc:
                raise UsageError(f"--config-file {path}: {key}: {exc}") from None
            continue
        prefixed = next((o for o in PREFIXED if key.startswith(o.file_prefix)), None)
        if key in SETTINGS or prefixed is not None:
            name = CONFIG if key in SETTINGS else prefixed.name
            pair_key = key if key in SETTINGS or prefixed.prefix_in_key else key[len(prefixed.file_prefix):]
            values.setdefault(name, {})[pair_key] = text
            continue
        nearest = difflib.get_close_matches(key, [*IN_FILE, *SETTINGS], n=1)
        hint = (f"did you mean {nearest[0]}?" if nearest else "neither a run option (e.g. bootstrap.servers, "
                "state.dir) nor a topic config (e.g. min.cleanable.dirty.ratio), nor "
                f"{', '.join(o.file_prefix + '*' for o in PREFIXED)}")
        raise UsageError(f"--config-file {path}: unknown key {key!r}; {hint}")
    return values


def origins(path: str, from_file: Mapping[str, Any]) -> dict[str, dict[str, str]]:
    """Where the file gave each KEY=VALUE option's keys, by option name and key, as written in it."""
    return {name: {k: f"{RUN_OPTIONS[name].file_key(k)} in {path}" for k in pairs}
            for name, pairs in from_file.items() if RUN_OPTIONS[name].type is Type.PAIRS}


def render(options: RunOptions) -> str:
    """The effective configuration in the file's own form: what --print-config shows, and a valid file."""
    lines: dict[str, str] = {}
    for name, value in options.values().items():
        option = RUN_OPTIONS[name]
        if not option.in_file or value is None or value is False or value == ():
            continue
        if option.type is Type.PAIRS:
            lines.update({option.file_key(k): v for k, v in value.items()})
        else:
            lines[name] = option.render(value)
    return java_properties.dumps(lines)
