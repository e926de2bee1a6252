"""Which output each topic's rows go to: a name (an Iceberg table, a Parquet directory) that may be a template,
so one job or one snapshot keeps one table per source table, as a database has them.

``{topic}`` is the topic's name; ``{table}`` and ``{schema}`` are its last two dot-separated parts, which is
where Debezium puts the source table and its schema (PREFIX.SCHEMA.TABLE). A name without a placeholder is
one output for every topic, which merges their columns: refused for values whose columns come from the
topic (json, debezium) unless asked for (``one_table``), since a table of two sources' columns is rarely
what anyone wants and cannot be split again.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Callable, Iterable

from streaming.errors import UsageError

PLACEHOLDERS = ("{topic}", "{table}", "{schema}")


@dataclass(frozen=True)
class OutputName:
    """An output's name as the user gave it; ``check`` says what is wrong with one expanded name (an Iceberg
    table must be NAMESPACE.TABLE), or None."""

    template: str
    flag: str
    check: Callable[[str], str | None] = lambda _: None

    def __post_init__(self) -> None:
        sample = self.expand("t.s.t")
        problem = self.check(sample) if self.per_topic else self.check(self.template)
        if problem:
            raise UsageError(f"{self.flag}: {problem}")

    @property
    def per_topic(self) -> bool:
        return any(p in self.template for p in PLACEHOLDERS)

    def expand(self, topic: str) -> str:
        parts = topic.split(".")
        return (self.template.replace("{topic}", topic).replace("{table}", parts[-1])
                .replace("{schema}", parts[-2] if len(parts) > 1 else ""))

    def groups(self, topics: Iterable[str]) -> dict[str, frozenset[str]]:
        """Each output's name and the topics it takes."""
        grouped: dict[str, set[str]] = defaultdict(set)
        for topic in topics:
            grouped[self.expand(topic)].add(topic)
        return {name: frozenset(members) for name, members in sorted(grouped.items())}

    def problem(self, name: str, topics: frozenset[str], columns_from_values: bool, one_table: bool) -> str | None:
        """What is wrong with one output: its name, or the columns of several topics merged in it while the
        values give the columns (unless ``one_table``)."""
        problem = self.check(name)
        if problem:
            return f"{self.flag} {self.template} for topic {min(topics)}: {problem}"
        if len(topics) > 1 and columns_from_values and not one_table:
            shown = ", ".join(sorted(topics)[:3]) + (", ..." if len(topics) > 3 else "")
            how = ("name each topic's output apart ({schema}.{table} or {topic})" if self.per_topic else
                   "put {table} or {topic} in it for one output per topic (for example shop.{table})")
            return (f"{self.flag} {name} would merge the columns of {len(topics)} topics ({shown}) in one output: "
                    f"{how}, or give --one-table to merge them")
        return None

    def of(self, topics: Iterable[str], columns_from_values: bool, one_table: bool) -> dict[str, frozenset[str]]:
        """Each output's name and the topics it takes; the first output with a problem is refused in one line."""
        grouped = self.groups(topics)
        for name, members in grouped.items():
            problem = self.problem(name, members, columns_from_values, one_table)
            if problem:
                raise UsageError(problem)
        return grouped


def namespace_table_problem(value: str) -> str | None:
    namespace, _, name = value.rpartition(".")
    return None if namespace and name else f"{value!r} is not NAMESPACE.TABLE"


def table_template_problem(value: str) -> str | None:
    """An Iceberg table's name, or a template of one per topic: NAMESPACE.TABLE once expanded."""
    try:
        OutputName(value, "", namespace_table_problem)
    except UsageError as exc:
        return str(exc).removeprefix(": ")
    return None
