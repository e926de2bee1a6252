"""The native path's C extension (``_rdkafka_columns``), the gate that says where it may run, and what the
librdkafka confluent-kafka loaded knows."""
