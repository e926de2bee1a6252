"""Which sink ACLs the source's topic ACLs call for, by MirrorMaker 2's rules: ALLOW READ and DESCRIBE
copied, ALL downgraded to READ, WRITE never; literal, wildcard and prefixed source ACLs alike."""

from __future__ import annotations

from streaming.kafka.access.acl_sync import sink_grants
from streaming.kafka.access.acls import Grant, Pattern, Resource


def test_read_describe_and_all_are_copied_to_the_sink_topic_as_literal_acls_and_write_never() -> None:
    source = [Grant("User:a", "READ", Resource.TOPIC, "orders"),
              Grant("User:b", "ALL", Resource.TOPIC, "orders"),
              Grant("User:c", "DESCRIBE", Resource.TOPIC, "ord", Pattern.PREFIXED, host="10.0.0.1"),
              Grant("User:d", "READ", Resource.TOPIC, "*"),
              Grant("User:w", "WRITE", Resource.TOPIC, "orders"),
              Grant("User:x", "ALTER_CONFIGS", Resource.TOPIC, "orders"),
              Grant("User:e", "READ", Resource.TOPIC, "payments"),
              Grant("User:f", "READ", Resource.TOPIC, "orders-archive", Pattern.PREFIXED)]
    got = sink_grants(source, {"orders": "orders.compacted"})
    assert got == [Grant("User:a", "READ", Resource.TOPIC, "orders.compacted"),
                   Grant("User:b", "READ", Resource.TOPIC, "orders.compacted"),
                   Grant("User:c", "DESCRIBE", Resource.TOPIC, "orders.compacted", host="10.0.0.1"),
                   Grant("User:d", "READ", Resource.TOPIC, "orders.compacted")]


def test_the_mirrors_own_principals_are_not_copied_to_the_sink() -> None:
    """The job reads the source to copy it: its READ there says nothing of who may read the copy."""
    source = [Grant("User:kcompact", "READ", Resource.TOPIC, "orders"),
              Grant("User:kcompact-sink", "ALL", Resource.TOPIC, "ord", Pattern.PREFIXED),
              Grant("User:reader", "READ", Resource.TOPIC, "orders")]
    got = sink_grants(source, {"orders": "orders.c"}, frozenset({"User:kcompact", "User:kcompact-sink"}))
    assert got == [Grant("User:reader", "READ", Resource.TOPIC, "orders.c")]


def test_a_grant_reads_as_the_kafka_acls_command_that_adds_it() -> None:
    assert (Grant("User:job", "DESCRIBE_CONFIGS", Resource.TOPIC, "orders.", Pattern.PREFIXED).command("b:9093")
            == "kafka-acls.sh --bootstrap-server b:9093 --add --allow-principal User:job --operation DescribeConfigs "
               "--topic 'orders.' --resource-pattern-type prefixed")
    assert (Grant("User:job", "ALTER", Resource.CLUSTER).command("b:9093")
            == "kafka-acls.sh --bootstrap-server b:9093 --add --allow-principal User:job --operation Alter --cluster")
    assert (Grant("User:job", "READ", Resource.GROUP, "g").command("b:9093", "admin.properties")
            == "kafka-acls.sh --bootstrap-server b:9093 --command-config admin.properties --add --allow-principal "
               "User:job --operation Read --group 'g'")
    assert Grant("User:job", "WRITE", Resource.TRANSACTIONAL_ID, "kcompact-", Pattern.PREFIXED).on() == \
        "transactional ids prefixed 'kcompact-'"
