"""Spark's edge: a Kafka streaming source on the Python Data Source API (kafka_source; its options and
offsets need no Spark)."""
