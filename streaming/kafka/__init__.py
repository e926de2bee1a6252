"""Kafka's edge, by role: the sink (emission), the source reads, groups, access (ACLs), the native path, the
headers every sink record carries, and here what they share: clients, administration, failure kinds. The only
package that imports confluent_kafka, besides the Spark source; the brokers the project runs live in
streaming.brokers."""
