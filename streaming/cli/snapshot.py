"""`kcompact snapshot`: the compacted state of a job's state dir as a table, once: Parquet files, one per
partition, or an Iceberg table upserted since its last snapshot. It reads the state dir, never Kafka, and
can run while the job runs. `kcompact run --snapshot-every` takes the Iceberg snapshot from the job. A name
with {table} or {topic} is one output per topic (streaming.configuration.output_names)."""

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
                   help="the Parquet snapshot's directory: TOPIC-PARTITION.parquet, each replaced whole; a template "
                        "(out/{table}, out/{topic}) gives each topic a directory of its own")
    for name in ("iceberg.table", "iceberg.catalog", "iceberg.warehouse"):
        option = RUN_OPTIONS[name]
        p.add_argument(option.flag, default=None, metavar=option.metavar, help=option.doc)
    p.add_argument("--value-format", choices=RUN_OPTIONS["snapshot.value.format"].choices, default="binary",
                   help="the value column: the bytes, UTF-8 text, JSON objects as a struct column (schema inferred "
                        "by the first snapshot, then evolved), or a Debezium change stream as the database table's "
                        "typed columns (docs/cdc.md)")
    p.add_argument("--json-null-deletes", action="store_true",
                   help=RUN_OPTIONS["snapshot.json.null.deletes"].doc)
    p.add_argument("--from-schema", choices=RUN_OPTIONS["snapshot.from.schema"].choices, default="all",
                   help=RUN_OPTIONS["snapshot.from.schema"].doc)
    p.add_argument("--one-table", action="store_true",
                   help="let one output without a {table} or {topic} template take the json or debezium values "
                        "of several topics, their columns merged")
    p.add_argument("--topic", action="append", default=None,
                   help="only these source topics: a name, or a regular expression matched whole (repeatable)")
    p.add_argument("--json", action="store_true", help="what the snapshot wrote, each partition's end, as JSON")
    p.set_defaults(func=_cmd_snapshot)


def _cmd_snapshot(args: argparse.Namespace) -> int:
    from streaming.configuration.output_names import namespace_table_problem  # noqa: PLC0415
    from streaming.errors import UsageError, UserError  # noqa: PLC0415
    from streaming.security.private_files import private_files  # noqa: PLC0415
    from streaming.configuration.output_names import OutputName  # noqa: PLC0415
    from streaming.table.snapshot import outputs  # noqa: PLC0415
    from streaming.table.values import FromSchema, ValueFormat, ValueSpec  # noqa: PLC0415

    spec = ValueSpec(ValueFormat(args.value_format), args.json_null_deletes, FromSchema(args.from_schema))
    fmt = args.format or ("iceberg" if args.iceberg_table else None)
    if fmt is None:
        raise UsageError("say where the snapshot goes: --format parquet --output DIR, or --iceberg-table NAMESPACE.TABLE")
    if fmt == "parquet":
        if not args.output or args.iceberg_table:
            raise UsageError("--format parquet writes to --output DIR (and takes no --iceberg-table)")
        from streaming.table.parquet_snapshot import write_parquet  # noqa: PLC0415 (pyarrow's parquet)

        name = OutputName(args.output, "--output")
        write = lambda output, topics: write_parquet(args.state_dir, output, spec, topics)  # noqa: E731
    else:
        if not args.iceberg_table or args.output:
            raise UsageError("--format iceberg writes to --iceberg-table NAMESPACE.TABLE (and takes no --output)")
        from streaming.iceberg import snapshot_to  # noqa: PLC0415 (pyiceberg)
        from streaming.iceberg.target import IcebergTarget  # noqa: PLC0415

        name = OutputName(args.iceberg_table, "--iceberg-table", namespace_table_problem)
        write = lambda table, topics: snapshot_to(  # noqa: E731
            args.state_dir, IcebergTarget(table, args.iceberg_catalog, args.iceberg_warehouse), spec, topics)
    reports, failed = [], []
    with private_files():  # as private as the state dir it copies, the catalog and a local warehouse too
        for output, topics in outputs(args.state_dir, name, spec, _topics(args), args.one_table).items():
            try:  # one output per topic: one that fails (a type change) leaves the others written
                reports.append(write(output, topics))
            except UserError as exc:
                if not name.per_topic:
                    raise
                failed.append(exc)
    if args.json:
        docs = [r.to_doc() for r in reports]
        print(json.dumps({"outputs": docs} if name.per_topic else docs[0], indent=2), file=sys.stdout)
    elif reports:
        print("\n".join(r.describe() for r in reports), file=sys.stdout)
    if failed:
        raise failed[0] if len(failed) == 1 else UserError(f"{len(failed)} outputs not written; the first: {failed[0]}")
    return 0


def _topics(args: argparse.Namespace) -> frozenset[str] | None:
    if not args.topic:
        return None
    from streaming.job.spec import load_saved  # noqa: PLC0415
    from streaming.state.stores import open_state_dir  # noqa: PLC0415

    return frozenset(load_saved(open_state_dir(args.state_dir)).selected(args.topic, args.state_dir))
