"""The local broker's storage is formatted with a cluster id of Kafka's own form."""

from __future__ import annotations

import base64

from streaming.brokers.local.server import cluster_id


def test_cluster_ids_are_kafka_uuids_that_no_command_line_takes_for_an_option() -> None:
    ids = [cluster_id() for _ in range(10_000)]  # about 156 of them would start with '-' if drawn plainly
    assert not [i for i in ids if i.startswith("-")]
    assert all(len(i) == 22 and len(base64.urlsafe_b64decode(i + "==")) == 16 for i in ids)
    assert len(set(ids)) == len(ids)
