"""`kcompact broker`: a local Apache Kafka in the foreground, for trying the compactor and for tests.

With --secure it also says how to reach its secured listeners, where ACLs are enforced: the CA, the SCRAM
super user and the file that holds its password, the client certificate, and a --config-file for each."""

from __future__ import annotations

import argparse
import re
import signal
import threading

from streaming.errors import UsageError


def cmd_broker(args: argparse.Namespace) -> int:
    from streaming.brokers.choice import start_local_broker, start_local_cluster  # noqa: PLC0415 (imports Kafka)
    from streaming.brokers.local.supervisor import supervise  # noqa: PLC0415

    if args.user and not args.secure:
        raise UsageError("--user makes a SCRAM user of the secured listeners: give --secure too")
    if args.advertised_port is not None and (args.port is None or args.brokers == 3):
        raise UsageError("--advertised-port is for one broker with --port: the proxy on the advertised port "
                         "forwards to --port")
    if args.brokers == 3:
        if args.port is not None:
            raise UsageError("--port is for one broker; a cluster's nodes take free ports (or those its --data-dir kept)")
        broker = start_local_cluster(data_dir=args.data_dir)
        what = f"Apache Kafka, 3 nodes, pids {', '.join(str(n.pid) for n in broker.cluster.nodes)}"
    elif args.advertised_port is not None:
        from streaming.brokers.local import Proxied  # noqa: PLC0415

        broker = start_local_broker(data_dir=args.data_dir, proxied=Proxied(args.port, args.advertised_port))
        what = (f"Apache Kafka, pid {broker.pid}, listening on {broker.server.direct_bootstrap_servers} behind the "
                f"proxy, which its own clients and other brokers bypass")
    else:
        broker = start_local_broker(port=args.port, data_dir=args.data_dir)
        what = f"Apache Kafka, pid {broker.pid}"
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        print(f"bootstrap.servers={broker.bootstrap_servers}  ({what}; Ctrl-C stops it)", flush=True)
        if args.secure:
            print(_secured(broker, args.user), flush=True)
        supervise(broker.cluster.nodes if broker.cluster else [broker.server], stop, lambda line: print(line, flush=True))
    except KeyboardInterrupt:
        pass
    finally:
        broker.stop()
    return 0


def _secured(broker, users: list[str]) -> str:
    from streaming.brokers.properties import ADMIN_USER  # noqa: PLC0415

    s = broker.secure
    files = s.write_client_files()
    c = s.certificates
    lines = [
        "secured listeners (ACLs enforced; the listener above is for set-up: its ANONYMOUS principal is a super user)",
        f"  SASL_SSL, SCRAM-SHA-512: {s.sasl_ssl_bootstrap_servers}  user {ADMIN_USER} (a super user), password in "
        f"{files.passwords} under '{ADMIN_USER}'",
        f"  SSL, client certificate required: {s.ssl_bootstrap_servers}  principal User:{c.client_name}",
        f"  ssl.ca.location={c.ca}",
        f"  ssl.certificate.location={c.client_cert}  ssl.key.location={c.client_key}",
        f"  kcompact run --config-file {files.scram_config} (SCRAM) or {files.mtls_config} (mTLS), "
        f"then --source-topic/--sink-topic/--state-dir",
        f"  the admin's client properties (kafka-acls.sh --command-config, kcompact --admin-config): "
        f"{files.admin_command}",
    ]
    for user in users:
        made = s.write_user(broker.bootstrap_servers, user)
        lines.append(f"  user {user} (SCRAM-SHA-512, no ACLs yet): password in {made.password}; kcompact run "
                     f"--config-file {made.config}; grant what a job needs: kcompact run ... --print-acls --apply "
                     f"--admin-config {files.admin_command}")
    return "\n".join(lines)


def add_parsers(sub) -> None:
    p = sub.add_parser("broker", help="run a local Apache Kafka (KRaft) in the foreground: one node, or a cluster "
                                      "of three (replication 3, min.insync.replicas 2)")
    p.add_argument("--brokers", type=int, choices=[1, 3], default=1, help="nodes (default 1)")
    p.add_argument("--port", type=int, default=None, help="port on 127.0.0.1 (default: a free one)")
    p.add_argument("--advertised-port", type=int, default=None, metavar="PORT",
                   help="with --port: tell clients to connect to 127.0.0.1:PORT, where a proxy (Toxiproxy, say) "
                        "forwards to --port, so every client connection passes through it; start the proxy first")
    p.add_argument("--data-dir", default=None, help="broker data directory (default: a temporary one)")
    p.add_argument("--secure", action="store_true",
                   help="also print how to reach the TLS listeners (SCRAM-SHA-512 over SASL_SSL, mTLS), where ACLs "
                        "are enforced, and write a --config-file for each")
    p.add_argument("--user", action="append", default=[], metavar="NAME", type=_user_name,
                   help="with --secure: also make this SCRAM user (repeatable), its new password in a 0600 file and "
                        "a --config-file that logs in as it; it holds no ACLs")
    p.set_defaults(func=cmd_broker)


def _user_name(text: str) -> str:
    if not re.fullmatch(r"[A-Za-z0-9._-]+", text) or text.startswith("."):
        raise argparse.ArgumentTypeError(f"{text!r} is not a user name (letters, digits, '.', '_', '-')")
    return text
