"""Housekeeping at the end of every run: each partition log of the state dir keeps only what its newest
manifest needs (PartitionLog.collect_at_end); a --once run over a backlog would otherwise leave every object
its passes replaced."""

from __future__ import annotations

import logging
from typing import Mapping

from streaming.log import LogConfig
from streaming.log.storage import Barrier
from streaming.state.layout import list_log_dirs, open_partition_log
from streaming.state.locks import partition_lock
from streaming.state.stores import StateDir

log = logging.getLogger(__name__)


def collect_at_end(state: StateDir, configs: Mapping[str, LogConfig]) -> None:
    """``configs``: the log config of each topic the job mirrors (the logs of other topics are left alone). The
    tasks' last manifests are made durable first (one barrier for the state dir): the collection keeps only the
    newest manifest of each log, and a power cut must find it whole."""
    if state.local:
        with Barrier() as barrier:
            barrier.owe_directory(state.root)
            barrier.cross()
    for log_dir in list_log_dirs(state):
        config = configs.get(log_dir.pid.topic)
        if config is None:
            continue
        try:
            with partition_lock(state, log_dir.directory):
                open_partition_log(state, log_dir, config).collect_at_end()
        except OSError as exc:  # housekeeping: a later open collects it (manifest.garbage_due)
            log.warning("%s: garbage collection at the end failed: %s", log_dir.directory, exc)
