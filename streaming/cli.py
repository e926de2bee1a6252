"""The `kcompact` command line."""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from typing import Sequence

from streaming import __version__
from streaming.broker import acquire_broker, start_local_broker


def _cmd_broker(args: argparse.Namespace) -> int:
    broker = start_local_broker(port=args.port, data_dir=args.data_dir)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    print(f"bootstrap.servers={broker.bootstrap_servers}  (pid {broker.pid}; Ctrl-C stops it)", flush=True)
    try:
        stop.wait()
    except KeyboardInterrupt:
        pass
    finally:
        broker.stop()
    return 0


def _cmd_demo(args: argparse.Namespace) -> int:
    from streaming.demo import run_demo  # noqa: PLC0415 (imports confluent-kafka)

    broker = acquire_broker()
    try:
        return run_demo(broker.bootstrap_servers, sys.stdout)
    finally:
        broker.stop()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kcompact", description=__doc__)
    parser.add_argument("--version", action="version", version=f"kcompact {__version__}")
    parser.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("broker", help="run a local Kafka-protocol broker (noida-db) in the foreground")
    p.add_argument("--port", type=int, default=None, help="port on 127.0.0.1 (default: a free one)")
    p.add_argument("--data-dir", default=None, help="broker data directory (default: a temporary one)")
    p.set_defaults(func=_cmd_broker)

    p = sub.add_parser("demo", help="produce a few keyed records and a tombstone, read them back")
    p.set_defaults(func=_cmd_demo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=args.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    return args.func(args)
