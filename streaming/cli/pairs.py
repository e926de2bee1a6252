"""The repeatable KEY=VALUE options (--kafka, --sink-kafka, --config, ...) as settings."""

from __future__ import annotations

import argparse
import re
from typing import Sequence

from streaming.errors import UsageError
from streaming.configuration.settings import key_values
from streaming.configuration.subscription import regex_problem


def parse_pairs(pairs: Sequence[str], option: str) -> dict[str, str]:
    try:
        return key_values(pairs)
    except ValueError as exc:
        raise UsageError(f"{option}: {exc}") from None


def regex_option(text: str, option: str) -> re.Pattern[str]:
    problem = regex_problem(text)
    if problem:
        raise UsageError(f"{option} {text!r} is {problem}")
    return re.compile(text)


def add_cluster_access_options(p: argparse.ArgumentParser) -> None:
    """How a command run by hand on a job's state dir reaches the job's two clusters (whose addresses the state
    dir keeps, and whose credentials it never does)."""
    p.add_argument("--kafka", action="append", default=[], metavar="KEY=VALUE",
                   help="librdkafka setting to reach the source (credentials are not kept in the state dir)")
    p.add_argument("--sink-kafka", action="append", default=[], metavar="KEY=VALUE",
                   help="librdkafka setting to reach the sink (on one cluster, --kafka's apply first)")
    p.add_argument("--json", action="store_true")
