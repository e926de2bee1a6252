"""Kafka's edge: administration, ACLs and their sync, the emitter (sink), consumer group offset sync, failure
kinds and plain clients. The only package that imports confluent_kafka, besides the Spark source that reads the
topic; the brokers the project runs live in streaming.brokers."""
