"""Kafka's edge, by role: the sink (emission), the source reads, groups, access (ACLs), the native path, and
here what they share: clients, administration, failure kinds and the headers every sink record carries. The only
package that imports confluent_kafka, besides the Spark source; the brokers the project runs live in
streaming.brokers."""
