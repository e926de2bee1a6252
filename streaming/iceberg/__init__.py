"""Iceberg tables of the compacted state, through pyiceberg: the package's one user of it. pyiceberg is the
optional extra `table`; require() says in one line what to install when it is missing."""

from __future__ import annotations

import importlib.util

from typing import TYPE_CHECKING

from streaming.errors import UsageError

if TYPE_CHECKING:
    from streaming.iceberg.target import IcebergTarget
    from streaming.table.snapshot import SnapshotReport
    from streaming.table.values import ValueSpec


def require() -> None:
    if importlib.util.find_spec("pyiceberg") is None:
        raise UsageError("Iceberg snapshots need pyiceberg, which is not installed: pip install 'kcompact[table]'")


def snapshot_to(state_dir: str, target: "IcebergTarget", spec: "ValueSpec",
                topics: frozenset[str] | None = None) -> "SnapshotReport":
    """The Iceberg snapshot (streaming.iceberg.snapshot), or the one-line hint when pyiceberg is missing."""
    require()
    from streaming.iceberg.snapshot import write_iceberg  # noqa: PLC0415 (after the check)

    return write_iceberg(state_dir, target, spec, topics)
