"""The `kcompact` command line: run the compactor, inspect its state, or try it on a local broker.

Each command's options and handler live in a module of their own (run, state_reports, snapshot, groups, acls, verify,
broker, playground, spark_submit); this one assembles the parser and reports errors the way every command does."""

from __future__ import annotations

import argparse
import contextlib
import faulthandler
import io
import functools
import os
import sys
import traceback
from typing import Sequence

from streaming import __version__
from streaming.runtime import logging_setup
from streaming.security import redaction
from streaming.cli import acls, broker, disaster, failback, groups, playground, run, snapshot, spark_submit, state_reports, verify
from streaming.errors import USER_ERRORS

COMMANDS = (run, state_reports, disaster, failback, snapshot, groups, acls, verify, broker, playground, spark_submit)


class HelpFormatter(argparse.HelpFormatter):
    """Each option's default at the end of its help, unless it has none or the help names it already."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if (not action.option_strings or "default" in text or action.default in (None, False, [])
                or action.default is argparse.SUPPRESS):
            return text
        return f"{text} (default: %(default)s)".lstrip()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kcompact", description=__doc__.split("\n\n")[0], formatter_class=HelpFormatter)
    parser.add_argument("--version", action="version", version=f"kcompact {__version__}")
    parser.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"],
                        help="the lowest level of log line shown, kcompact's and Spark's (Spark's INFO only at DEBUG)")
    parser.add_argument("--log-format", default="text", choices=["text", "json"],
                        help="log lines on stderr: text for people, json (one object per line) for log shippers")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser = functools.partial(sub.add_parser, formatter_class=HelpFormatter)  # every command shows defaults

    for command in COMMANDS:
        command.add_parsers(sub)
    p = sub.add_parser("demo", help="compact a small change stream on a local broker and show the result")
    p.add_argument("--state-dir", default=None, help="keep the demo's state here (default: a temporary dir)")
    p.set_defaults(func=_cmd_demo)
    return parser


def _cmd_demo(args: argparse.Namespace) -> int:
    from streaming.brokers.choice import acquire_broker  # noqa: PLC0415 (imports confluent-kafka)
    from streaming.cli.demo import run_demo  # noqa: PLC0415

    with acquire_broker() as found:  # the demo runs the command line itself, so it is this module's
        return run_demo(found.bootstrap_servers, sys.stdout, main, args.state_dir)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    logging_setup.configure(args.log_level, args.log_format)
    # a crash inside a native library (librdkafka, Arrow's S3 client, the JVM bridge) prints every thread's
    # Python stack before the process dies, not nothing; a caller's stderr without a file (a test's capture)
    # keeps its own handler
    with contextlib.suppress(io.UnsupportedOperation, AttributeError):
        faulthandler.enable(all_threads=True)
    try:
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
