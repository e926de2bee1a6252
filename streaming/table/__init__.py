"""The compacted state as a table: each live key's winner, read from the state dir's logs, written out as
Parquet or Iceberg (streaming.iceberg) and read by Spark (streaming.spark.source.state_source)."""
