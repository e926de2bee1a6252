"""Who does what in the local three-node cluster, read from the cluster itself: partition leaders, the
transaction coordinator of a transactional id, the coordinator of a consumer group, whether every ISR is full."""

from __future__ import annotations

from confluent_kafka.admin import AdminClient

TRANSACTION_STATE_PARTITIONS = 4  # transaction.state.log.num.partitions (streaming.brokers.properties)


def _admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 5000})


def isr_full(bootstrap: str) -> bool:
    """Every partition of every topic (the internal ones too) has all three replicas in sync."""
    try:
        topics = _admin(bootstrap).list_topics(timeout=10).topics
    except Exception:  # noqa: BLE001 (a cluster that is not answering is not full)
        return False
    return all(len(p.isrs) == 3 and p.leader >= 0 for t in topics.values() for p in t.partitions.values())


def leader(bootstrap: str, topic: str, partition: int) -> int:
    """The partition's leader as a new client sees it now (-1: none)."""
    return _admin(bootstrap).list_topics(topic, timeout=10).topics[topic].partitions[partition].leader


def java_hash(text: str) -> int:
    """Java's String.hashCode, which places a transactional id on a partition of __transaction_state."""
    h = 0
    for ch in text:  # topic names, and so transactional ids, are ASCII: one UTF-16 unit a character
        h = (31 * h + ord(ch)) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def transaction_state_partition(txn_id: str) -> int:
    """The __transaction_state partition of ``txn_id`` (Kafka's Utils.abs(hashCode) % n)."""
    h = java_hash(txn_id)
    return (0 if h == -(1 << 31) else abs(h)) % TRANSACTION_STATE_PARTITIONS


def transaction_coordinator(bootstrap: str, txn_id: str) -> int:
    return leader(bootstrap, "__transaction_state", transaction_state_partition(txn_id))


def group_coordinator(bootstrap: str, group: str) -> int:
    admin = _admin(bootstrap)
    return admin.describe_consumer_groups([group], request_timeout=10)[group].result(15).coordinator.id
