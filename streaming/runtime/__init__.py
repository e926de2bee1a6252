"""What a kcompact process sets up around its work: log output, the per-user cache of derived files, and
the named moments a failover drill holds a job at."""
