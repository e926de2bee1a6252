"""`python -m streaming.brokers.local`: fetch the pinned Apache Kafka jars (the set-up script's step)."""

import sys

from streaming.brokers.local.jars import KafkaJarsError, ensure_kafka_jars

try:
    jars = ensure_kafka_jars()
except KafkaJarsError as exc:
    print(f"kcompact: error: {exc}", file=sys.stderr)
    sys.exit(1)
print(f"Apache Kafka {jars.version}: {jars.directory}")
