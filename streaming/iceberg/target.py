"""Where an Iceberg snapshot goes, as the user names it; checked before pyiceberg is loaded."""

from __future__ import annotations

import os
from dataclasses import dataclass
from urllib.parse import urlparse

from streaming.errors import UsageError
from streaming.configuration.output_names import namespace_table_problem

DEFAULT_DIR = "kcompact-iceberg"


@dataclass(frozen=True)
class IcebergTarget:
    """Where the table lives: NAMESPACE.TABLE in a catalog (a SQL database URI, or http(s):// for a REST
    catalog) whose data files go to the warehouse (a directory or an object store URI; a REST catalog may
    choose its own)."""

    table: str
    catalog: str | None = None
    warehouse: str | None = None

    def __post_init__(self) -> None:
        problem = namespace_table_problem(self.table)
        if problem:
            raise UsageError(f"--iceberg-table: {problem}")

    def settings(self) -> dict[str, str]:
        """pyiceberg's catalog properties. Without a catalog: SQLite and a warehouse in ./kcompact-iceberg."""
        if self.catalog is None:
            base = os.path.abspath(DEFAULT_DIR)
            os.makedirs(base, exist_ok=True)
            return {"type": "sql", "uri": f"sqlite:///{base}/catalog.db",
                    "warehouse": self.warehouse or f"file://{base}/warehouse"}
        scheme = urlparse(self.catalog).scheme
        kind = "rest" if scheme in ("http", "https") else "sql"
        if kind == "sql" and not scheme:
            raise UsageError(f"--iceberg-catalog {self.catalog!r} is not a URI: give sqlite:///PATH, "
                             f"postgresql://HOST/DB or http(s)://HOST for a REST catalog")
        warehouse = self.warehouse
        if scheme == "sqlite":  # sqlite:///REL.db or sqlite:////ABS.db, as SQLAlchemy reads them
            home = os.path.abspath(os.path.dirname(urlparse(self.catalog).path[1:]) or ".")
            os.makedirs(home, exist_ok=True)  # SQLite makes the file, not its directory
            warehouse = warehouse or f"file://{home}/warehouse"
        return {"type": kind, "uri": self.catalog, **({"warehouse": warehouse} if warehouse else {})}
