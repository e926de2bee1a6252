"""`kcompact snapshot`: the compacted state of a job's state dir as a table, once: Parquet files, one per
partition, or an Iceberg table upserted since its last snapshot. It reads the state dir, never Kafka, and
can run while the job runs. `kcompact run --snapshot-every` takes the Iceberg snapshot from the job."""

from __future__ import annotations

import argparse
import json
import sys

from streaming.configuration.settings import RUN_OPTIONS


def add_parsers(sub) -> None:
    p = sub.add_parser("snapshot", help="write the compacted state out as a table: Parquet files or an Iceberg table")
    p.add_argument("--state-dir", required=True)
    p.add_argument("--format", choices=["parquet", "iceberg"], default=None,
                   help="parquet (with --output) or iceberg (with --iceberg-table); --iceberg-table alone means "
                        "iceberg")
    p.add_argument("--output", default=None, metavar="DIR",
                   help="the Parquet snapshot's directory: TOPIC-PARTITION.parquet, each replaced whole")
    for name in ("iceberg.table", "iceberg.catalog", "iceberg.warehouse"):
        option = RUN_OPTIONS[name]
        p.add_argument(option.flag, default=None, metavar=option.metavar, help=option.doc)
    p.add_argument("--value-format", choices=RUN_OPTIONS["snapshot.value.format"].choices, default="binary",
                   help="the value column: the bytes, UTF-8 text, JSON objects as a struct column (schema inferred "
                        "by the first snapshot, then evolved), or a Debezium change stream as the database table's "
                        "typed columns (docs/cdc.md)")
    p.add_argument("--json-null-deletes", action="store_true",
                   help=RUN_OPTIONS["snapshot.json.null.deletes"].doc)
    p.add_argument("--topic", action="append", default=None,
                   help="only these source topics: a name, or a regular expression matched whole (repeatable)")
    p.add_argument("--json", action="store_true", help="what the snapshot wrote, each partition's end, as JSON")
    p.set_defaults(func=_cmd_snapshot)


def _cmd_snapshot(args: argparse.Namespace) -> int:
    from streaming.errors import UsageError  # noqa: PLC0415
    from streaming.security.private_files import private_files  # noqa: PLC0415
    from streaming.table.values import ValueFormat, ValueSpec  # noqa: PLC0415

    spec = ValueSpec(ValueFormat(args.value_format), args.json_null_deletes)
    fmt = args.format or ("iceberg" if args.iceberg_table else None)
    if fmt is None:
        raise UsageError("say where the snapshot goes: --format parquet --output DIR, or --iceberg-table NAMESPACE.TABLE")
    if fmt == "parquet":
        if not args.output or args.iceberg_table:
            raise UsageError("--format parquet writes to --output DIR (and takes no --iceberg-table)")
        from streaming.table.parquet_snapshot import write_parquet  # noqa: PLC0415 (pyarrow's parquet)

        with private_files():  # as private as the state dir it copies
            report = write_parquet(args.state_dir, args.output, spec, _topics(args))
    else:
        if not args.iceberg_table or args.output:
            raise UsageError("--format iceberg writes to --iceberg-table NAMESPACE.TABLE (and takes no --output)")
        from streaming.iceberg import snapshot_to  # noqa: PLC0415 (pyiceberg)
        from streaming.iceberg.target import IcebergTarget  # noqa: PLC0415

        target = IcebergTarget(args.iceberg_table, args.iceberg_catalog, args.iceberg_warehouse)
        with private_files():  # the catalog and a local warehouse too
            report = snapshot_to(args.state_dir, target, spec, _topics(args))
    print(json.dumps(report.to_doc(), indent=2) if args.json else report.describe(), file=sys.stdout)
    return 0


def _topics(args: argparse.Namespace) -> frozenset[str] | None:
    if not args.topic:
        return None
    from streaming.job.spec import load_saved  # noqa: PLC0415
    from streaming.state.stores import open_state_dir  # noqa: PLC0415

    return frozenset(load_saved(open_state_dir(args.state_dir)).selected(args.topic, args.state_dir))
