"""An output's name per topic: {topic}, {table} and {schema} expand from Debezium's PREFIX.SCHEMA.TABLE, a
name that would merge several topics' columns is refused unless asked for, and a name checked once
expanded."""

from __future__ import annotations

import pytest

from streaming.configuration.output_names import OutputName, namespace_table_problem
from streaming.errors import UsageError

TOPICS = ["shop.public.customers", "shop.public.orders", "audit.events"]


def test_a_template_expands_to_an_output_per_topic() -> None:
    name = OutputName("cdc.{schema}_{table}", "--iceberg-table", namespace_table_problem)
    assert name.per_topic
    assert name.of(TOPICS, columns_from_values=True, one_table=False) == {
        "cdc.audit_events": frozenset({"audit.events"}), "cdc.public_customers": frozenset({"shop.public.customers"}),
        "cdc.public_orders": frozenset({"shop.public.orders"})}
    assert OutputName("{topic}", "--iceberg-table", namespace_table_problem).expand("shop.public.x") == "shop.public.x"


def test_one_name_for_several_topics_is_refused_where_the_values_give_the_columns_unless_asked_for() -> None:
    name = OutputName("out", "--output")
    with pytest.raises(UsageError, match=r"^--output out would merge the columns of 3 topics \(audit.events, "
                                         r"shop.public.customers, shop.public.orders\) in one output"):
        name.of(TOPICS, columns_from_values=True, one_table=False)
    assert name.of(TOPICS, columns_from_values=True, one_table=True) == {"out": frozenset(TOPICS)}
    assert name.of(TOPICS, columns_from_values=False, one_table=False) == {"out": frozenset(TOPICS)}  # Kafka's columns
    with pytest.raises(UsageError, match="would merge the columns of 2 topics"):  # the same table of two prefixes
        OutputName("o/{table}", "--output").of(["a.public.t", "b.public.t"], True, False)


def test_a_name_is_checked_when_given_and_for_each_topic_once_expanded() -> None:
    with pytest.raises(UsageError, match="^--iceberg-table: 'orders' is not NAMESPACE.TABLE$"):
        OutputName("orders", "--iceberg-table", namespace_table_problem)
    with pytest.raises(UsageError, match=r"^--iceberg-table \{topic\} for topic orders: 'orders' is not NAMESPACE.TABLE"):
        OutputName("{topic}", "--iceberg-table", namespace_table_problem).of(["orders"], True, False)
