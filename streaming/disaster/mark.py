"""The mark a promote or a failover leaves in the state dir: its report. While it is there the job does not
mirror in its old direction again, so a restart by a supervisor after the switch cannot write the old
primary's records over the DR site's new ones (split brain)."""

from __future__ import annotations

import logging

from streaming.disaster.report import SwitchReport
from streaming.errors import JobError
from streaming.log.storage import read_json, write_json
from streaming.state.layout import switch_file
from streaming.state.stores import StateDir
from streaming.utc import utc_text

log = logging.getLogger(__name__)


def switched(state: StateDir) -> SwitchReport | None:
    doc = read_json(state.storage, switch_file(state))
    return None if doc is None else SwitchReport.from_doc(doc)


def mark(state: StateDir, report: SwitchReport) -> None:
    write_json(state.storage, switch_file(state), report.to_doc(), indent=2)


def switched_meanwhile(state: StateDir) -> str | None:
    """What a running job says as it stops, when a promote or a failover marked its state dir while it ran (an
    object store's state dir has no lock to keep a switch from running beside it): None while unmarked."""
    report = switched(state)
    if report is None:
        return None
    return (f"the job of {state.uri} was {report.switch.value} at {utc_text(report.at_ms)} UTC while it ran: "
            f"the DR site is the writer now, so it stopped before its next emission (see kcompact status)")


def refuse_old_direction(state: StateDir, force: bool) -> None:
    """A job switched away from refuses to run; ``force`` (run --force) clears the mark and says so."""
    report = switched(state)
    if report is None:
        return
    when = f"{utc_text(report.at_ms)} UTC"
    if not force:
        raise JobError(f"the job of {state.uri} was {report.switch.value} at {when}: the DR site is the writer now, "
                       f"and this job does not mirror in its old direction again; give --force to mirror again "
                       f"(see kcompact status for its report)")
    state.storage.delete(switch_file(state))
    log.warning("--force: the job of %s was %s at %s; its mark is cleared and it mirrors again", state.uri,
                report.switch.value, when)
