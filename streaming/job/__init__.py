"""The compactor job: its spec, the append and compaction stages, metrics, and the runner that drives them."""
