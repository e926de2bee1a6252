"""Spark's edge: the session, Spark's home, the Python worker daemon and tuning, and the Kafka source.
The only package that imports pyspark."""
