"""kcompact: an external, Spark-based log compactor for Kafka topics."""

__version__ = "0.1.0"
