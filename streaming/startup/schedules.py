"""The syncs that run beside the job (group offsets, topic ACLs, an Iceberg table), made from the run's options on
the clusters the job itself uses; None where the run did not ask for one."""

from __future__ import annotations

import re
from typing import Sequence

from streaming.configuration import config_providers
from streaming.configuration.output_names import OutputName, namespace_table_problem
from streaming.job.acl_sync import AclSyncSchedule
from streaming.job.group_sync import GroupSyncSchedule
from streaming.job.options import RunOptions, Schedules, TableSync
from streaming.kafka.access.acl_sync import TopicAclSync
from streaming.kafka.access.permissions import principal_of
from streaming.kafka.admin import Cluster
from streaming.kafka.groups.group_sync import GroupOffsetSync, GroupSyncTotals
from streaming.table.values import FromSchema, ValueFormat, ValueSpec


def for_job(options: RunOptions, source: Cluster, sink: Cluster, table: TableSync | None) -> Schedules:
    """``table``: made before the clusters were asked (a table name the topics cannot take is a usage error). The
    switch check is added where the state dir the job runs in is known (streaming.startup.assembly)."""
    return Schedules(_group_sync(options, source, sink), _acl_sync(options, source, sink), table)


def table_sync(options: RunOptions, topics: Sequence[str]) -> TableSync | None:
    """The tables' schedule, checked before the job starts: a table name without a template that would take
    several listed topics' columns is refused here (a pattern's topics are checked at each snapshot)."""
    if options.snapshot_every is None:
        return None
    from streaming.iceberg import require  # noqa: PLC0415 (pyiceberg is loaded only by a run that keeps a table)
    from streaming.iceberg.schedule import TableSyncSchedule  # noqa: PLC0415

    require()  # before the job starts: a missing pyiceberg is one line, not a warning per stage
    name = OutputName(options.iceberg_table, "--iceberg-table", namespace_table_problem)
    values = ValueSpec(ValueFormat(options.snapshot_value_format or "binary"), options.snapshot_json_null_deletes,
                       FromSchema(options.snapshot_from_schema or "all"))
    name.of(topics, values.columns_from_values, options.snapshot_one_table)
    return TableSyncSchedule(name, options.iceberg_catalog, options.iceberg_warehouse, values, options.snapshot_every,
                             options.snapshot_one_table)


def _group_sync(options: RunOptions, source: Cluster, sink: Cluster) -> GroupSyncSchedule | None:
    """The job's group offset sync (--sync-group-offsets), on the clusters the job itself uses."""
    if options.sync_group_offsets is None:
        return None
    syncer = GroupOffsetSync(source, sink, re.compile(options.sync_group_offsets),
                             options.sync_group_offsets_allow_rewind)
    return GroupSyncSchedule(syncer, options.sync_group_offsets_interval, GroupSyncTotals())


def _acl_sync(options: RunOptions, source: Cluster, sink: Cluster) -> AclSyncSchedule | None:
    """The topic ACL sync (--sync-topic-acls). The job's own principals read the source to copy it, so their ACLs
    are not copied: they are read here from the clients' settings (a client certificate's file too)."""
    if not options.sync_topic_acls:
        return None
    mirror = frozenset(principal_of(config_providers.resolve_all(c.settings)) for c in (source, sink))
    return AclSyncSchedule(TopicAclSync(source, sink, mirror), options.sync_topic_acls_interval)
