"""The state dir a job is to run in, read before anything is created anywhere. Apart from the assembly so that a
failback checks its reverse state dir without loading the job's Spark and Kafka modules."""

from __future__ import annotations

from streaming.disaster.mark import refuse_old_direction
from streaming.job.spec import JobMapping, check_state_dir_mapping
from streaming.security.private_files import warn_if_readable_by_others
from streaming.state.stores import StateDir, check_access, open_state_dir


def checked_state_dir(uri: str, mapping: JobMapping, force: bool = False, write: bool = True) -> StateDir:
    """One the user can write (``write``: False for a dry run), of this mapping (or of none yet), not switched
    away from (``force`` clears that mark); one others can read is warned of."""
    state = open_state_dir(uri)
    check_access(state, write=write)
    check_state_dir_mapping(state, mapping)
    refuse_old_direction(state, force)
    warn_if_others_can_read(state)
    return state


def warn_if_others_can_read(state: StateDir) -> None:
    """A local state dir others can read holds a copy of the mirrored data: every run in one says so."""
    warn_if_readable_by_others(state.root if state.local else None, "--state-dir")
