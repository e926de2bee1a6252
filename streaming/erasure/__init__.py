"""The erase audit: when each tombstone's key left the compactor's log and reached the sink (KIP-354's
bounded time to erase, made visible). Plain Python and Arrow, like the log and the cleaner it reads."""
