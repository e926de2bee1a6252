"""Kafka's edge: administration, the emitter (sink), failures, plain clients, and the broker for tests and
the demo. The only package that imports confluent_kafka, besides the Spark source that reads the topic."""
