"""A partition log's journal: facts about the log's records, committed with the change that made them true.

A commit with something to say writes one immutable object of JSON lines under journal/ before its
manifest, and that manifest names it as the journal's head; each object names the one before it. So the
journal holds what committed changes did and nothing else: the object of a commit that was fenced, or cut
short by a crash, is reachable from no manifest, and a replayed change says a thing again only if it did it
again. The log gives the events no meaning (the erase audit does). Its objects are never collected: the
journal is the log's history, kept after the records it speaks of are gone.
"""

from __future__ import annotations

import json
import posixpath
import uuid
from typing import Any, Iterator, Protocol, Sequence

from streaming.log.manifest import load_newest
from streaming.log.storage import Storage

JOURNAL = "journal"

Doc = dict[str, Any]  # an event as the journal holds it: a JSON object


class JournalEvent(Protocol):
    """What a writer journals: the log gives it no meaning, and keeps the object it makes of itself."""

    def to_doc(self) -> Doc: ...


def journal_dir(directory: str) -> str:
    return posixpath.join(directory, JOURNAL)


def write_entry(storage: Storage, directory: str, version: int, previous: str | None,
                events: Sequence[JournalEvent]) -> str:
    """Write one commit's events; the name returned goes into that commit's manifest. The name carries the
    version and a nonce, so two writers racing for one version never write the same object."""
    name = f"{version:020d}-{uuid.uuid4().hex[:12]}.jsonl"
    lines = [json.dumps({"previous": previous}), *(json.dumps(e.to_doc(), separators=(",", ":")) for e in events)]
    storage.put(posixpath.join(journal_dir(directory), name), ("\n".join(lines) + "\n").encode())
    return name


def read_journal(storage: Storage, directory: str, head: str | None) -> list[Doc]:
    """Every event from the first commit to ``head``, oldest first."""
    chunks = list(_newest_first(storage, directory, head))
    return [e for events in reversed(chunks) for e in events]


def committed_journal(storage: Storage, directory: str) -> list[Doc]:
    """read_journal from the newest manifest, without opening the log for writing: for readers beside a
    running job (kcompact erasures, checks of a state dir)."""
    manifest = load_newest(storage, directory).manifest
    return [] if manifest is None else read_journal(storage, directory, manifest.journal)


def _newest_first(storage: Storage, directory: str, head: str | None) -> Iterator[list[Doc]]:
    name = head
    while name is not None:
        lines = storage.get(posixpath.join(journal_dir(directory), name)).decode().splitlines()
        name = json.loads(lines[0])["previous"]
        yield [json.loads(line) for line in lines[1:]]
