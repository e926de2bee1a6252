"""librdkafka settings every consumer of the compactor starts from (user settings override them)."""

# Some Kafka-protocol brokers (noida-db among them) ignore fetch.max.bytes and answer with a whole
# partition; librdkafka drops responses larger than this and would retry forever.
CONSUMER_DEFAULTS: dict[str, str] = {"receive.message.max.bytes": "1073741824"}
