"""`kcompact submit`: `kcompact run` on a Spark cluster through spark-submit, printing what a local run prints.

Its own options say where and how (the master, Spark settings, packages, the driver's address); everything
from the word 'run' on is the run command as it would be given locally. --print-command prints the
spark-submit command line and its environment instead, for a scheduler that runs spark-submit itself.
"""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path

from streaming.cli.pairs import parse_pairs
from streaming.errors import UsageError

APPLICATION = Path(__file__).with_name("submit.py")  # beside this file, not imported: it imports main
USAGE = "kcompact submit --master URL [options] run --bootstrap-servers ... (the run command as given locally)"


def add_parsers(sub) -> None:
    p = sub.add_parser("submit", help="run the job on a Spark cluster through spark-submit",
                       usage=USAGE, description=__doc__.split("\n\n")[1])
    p.add_argument("--master", required=True, help="spark://HOST:7077, k8s://https://HOST:6443, yarn or local[N]")
    p.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                   help="Spark setting (repeatable), over kcompact's: spark.pyspark.python (default: this "
                        "interpreter) for executors whose Python lives elsewhere, spark.executor.memory, ...")
    p.add_argument("--packages", default=None, help="Maven coordinates for spark-submit --packages, e.g. "
                                                     "org.apache.hadoop:hadoop-aws:3.5.0 for s3a:// checkpoints")
    p.add_argument("--archives", default=None, help="spark-submit --archives, e.g. a packed virtualenv venv.tar.gz#venv")
    p.add_argument("--driver-host", default=None, metavar="ADDRESS",
                   help="the address executors reach the driver at (spark.driver.host, and SPARK_LOCAL_IP to bind); "
                        "default: $SPARK_LOCAL_IP, else the address this host reaches the master from")
    p.add_argument("--print-command", action="store_true",
                   help="print the spark-submit command line (with its environment) and exit")
    p.add_argument("run", nargs=argparse.REMAINDER, help="run and its options")
    p.set_defaults(func=cmd_submit)

    p = sub.add_parser("submit-file", help="print the application file to hand spark-submit (docs/cluster.md)")
    p.set_defaults(func=_cmd_submit_file)


def _cmd_submit_file(args: argparse.Namespace) -> int:
    print(APPLICATION)
    return 0


def cmd_submit(args: argparse.Namespace) -> int:
    from streaming.spark.submit import SubmitPlan, run_submitted  # noqa: PLC0415

    if not args.run or args.run[0] != "run":
        raise UsageError(f"kcompact submit needs the run command after its own options: {USAGE}")
    plan = SubmitPlan(str(APPLICATION), args.master, tuple(args.run[1:]), parse_pairs(args.conf, "--conf"),
                      args.packages, args.archives, args.driver_host, args.log_level, args.log_format)
    if args.print_command:
        env = plan.environment()
        print(" ".join(f"{k}={shlex.quote(env[k])}" for k in ("SPARK_HOME", "SPARK_LOCAL_IP") if k in env),
              shlex.join(plan.command()))
        return 0
    return run_submitted(plan)
