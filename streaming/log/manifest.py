"""A partition log's manifests: version N describes the whole log (its segments, their objects, the
cleaner's checkpoint) as the Nth commit left it.

A commit creates the next version with put-if-absent and nothing else: no append, no rename, so it works
on object stores, and it is atomic wherever a whole-object write is. Two writers of one log (a zombie task
of a dead driver beside the task of its successor) cannot both create version N: the second is fenced,
as Kafka's transactional ids fence a zombie producer on the sink side. A crash between writing objects and
the manifest leaves the objects unreferenced; the previous manifest still describes the log.

Old versions and unreferenced objects are deleted later, and only once older than a grace period (Kafka's
file.delete.delay.ms): a writer between its objects and its manifest, or a reader of an older version, may
still need them. The end of a run need not wait (see read_hold).
"""

from __future__ import annotations

import json
import logging
import posixpath
from typing import Any, Iterable, Mapping
from dataclasses import dataclass, field

from streaming.errors import UserError
from streaming.log.segment import SegmentMeta
from streaming.log.storage import ObjectInfo, Storage, read_json

log = logging.getLogger(__name__)

MANIFESTS = "manifests"
OBJECTS = "segments"
MANIFEST_SUFFIX = ".json"
FORMAT = 1
KEEP_MANIFESTS = 8
# What makes an open's collection worth its reads (garbage_due): so many items (old manifests past the kept ones,
# old objects the newest manifest does not name), so many bytes of such objects, or one item so many grace periods old
DUE_ITEMS = 8
DUE_BYTES = 64 << 20
DUE_AGE_GRACES = 10


class LogFencedError(UserError, RuntimeError):
    """Another writer committed to this log since this one opened it: this writer must reopen the log."""


@dataclass
class Manifest:
    version: int
    segments: list[SegmentMeta]
    cleaner_checkpoint: int | None = None  # the first dirty offset: below it the log is clean
    journal: str | None = None  # the newest journal object (see journal.py)
    # small documents the log's writers carry forward: how far the journal's notes got, the cleaner's state,
    # the emission's progress (committed with the log, so a stage's notes cost no write of their own)
    marks: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> bytes:
        return json.dumps({"format": FORMAT, "version": self.version, "cleaner_checkpoint": self.cleaner_checkpoint,
                           "journal": self.journal, "marks": self.marks,
                           "segments": [s.to_dict() for s in self.segments]}, sort_keys=True).encode()

    @classmethod
    def from_json(cls, data: bytes) -> "Manifest":
        """Raises ValueError for anything that is not a whole manifest of a known format."""
        try:
            doc = json.loads(data)
            if doc.get("format") != FORMAT:
                raise ValueError(f"unknown manifest format {doc.get('format')!r}")
            return cls(int(doc["version"]), [SegmentMeta.from_dict(s) for s in doc["segments"]],
                       doc.get("cleaner_checkpoint"), doc.get("journal"), dict(doc.get("marks") or {}))
        except (KeyError, TypeError, AttributeError, json.JSONDecodeError) as exc:
            raise ValueError(f"not a manifest ({type(exc).__name__}: {exc})") from exc


@dataclass
class Loaded:
    """What opening found: the newest valid manifest (None for a new log), the newest version name in
    use (the next commit must go above it, valid or not) and the versions that did not parse."""

    manifest: Manifest | None
    newest_version: int = -1
    invalid: list[str] = field(default_factory=list)
    listed: list[ObjectInfo] = field(default_factory=list)  # the manifests directory as it was listed


def mark_or_file(marks: Mapping[str, Any], mark: str, storage: Storage, path: str) -> Any | None:
    """A document the log's writers keep as a mark of its manifest, or, for a log an older kcompact last committed,
    the file it kept it in (``path``); None: neither."""
    found = marks.get(mark)
    return read_json(storage, path) if found is None else found


def manifest_dir(directory: str) -> str:
    return posixpath.join(directory, MANIFESTS)


def objects_dir(directory: str) -> str:
    return posixpath.join(directory, OBJECTS)


def _name(version: int) -> str:
    return f"{version:020d}{MANIFEST_SUFFIX}"


def _path(directory: str, version: int) -> str:
    return posixpath.join(manifest_dir(directory), _name(version))


def _version_of(name: str) -> int | None:
    """The version a listed name is the manifest of; None for anything else (a writer's temporary file)."""
    stem = name[: -len(MANIFEST_SUFFIX)]
    return int(stem) if name.endswith(MANIFEST_SUFFIX) and stem.isdigit() else None


def _by_version(infos: list[ObjectInfo]) -> dict[int, ObjectInfo]:
    """The manifests among the listed objects, by version."""
    return {v: i for i in infos if (v := _version_of(i.name)) is not None}


def _versions(names: Iterable[str]) -> list[int]:
    """The manifest versions among the listed names, newest first."""
    return sorted((v for n in names if (v := _version_of(n)) is not None), reverse=True)


def load_newest(storage: Storage, directory: str) -> Loaded:
    """The newest manifest that parses wins; newer ones that do not are reported, never deleted."""
    listed = storage.list(manifest_dir(directory))
    versions = _versions(i.name for i in listed)
    loaded = Loaded(None, versions[0] if versions else -1, listed=listed)
    for v in versions:
        path = _path(directory, v)
        try:
            loaded.manifest = Manifest.from_json(storage.get(path))
            return loaded
        except (ValueError, FileNotFoundError) as exc:
            log.error("manifest %s is not valid, an older one is used: %s", path, exc)
            loaded.invalid.append(_name(v))
    return loaded


def commit(storage: Storage, directory: str, manifest: Manifest, opened_at: int) -> None:
    """Create the manifest's version, or raise LogFencedError. A writer so late that its version was
    already collected as garbage creates it again, but finds newer ones beside it: it is fenced too, and
    the version it left behind is older than the newest, so no reader takes it."""
    created = storage.put_if_absent(_path(directory, manifest.version), manifest.to_json())
    if not created or _versions(storage.names(manifest_dir(directory)))[0] > manifest.version:
        raise LogFencedError(f"partition log {directory}: manifest version {manifest.version} or a later one was "
                             f"created by another writer since this one opened the log at version {opened_at}; "
                             f"this writer is fenced (a task of an earlier run?) and must reopen the log")


def garbage_due(loaded: Loaded, objects: list[ObjectInfo], now_ms: int, grace_ms: int) -> bool:
    """Whether collect_garbage has a collection's worth to do, from the listings alone: of the manifests beyond the
    newest KEEP_MANIFESTS and the objects the newest manifest does not name, those older than the grace period, at
    least DUE_ITEMS of them, DUE_BYTES of objects, or one DUE_AGE_GRACES grace periods old. A collection reads every
    manifest it keeps, and a job opens each log twice a stage: less waits for a later open (or the every-32-commits
    collection), and a log that has gone quiet still gets its garbage collected by the next run's open."""
    if loaded.manifest is None:
        return False
    named = {c.name for s in loaded.manifest.segments for c in s.chunks}
    by_version = _by_version(loaded.listed)
    versions = sorted(by_version, reverse=True)
    old = now_ms - grace_ms
    unnamed = [i for i in objects if i.name not in named and i.mtime_ms <= old]
    due = unnamed + [by_version[v] for v in versions[KEEP_MANIFESTS:] if by_version[v].mtime_ms <= old]
    return (len(due) >= DUE_ITEMS or sum(i.size for i in unnamed) >= DUE_BYTES
            or any(i.mtime_ms <= now_ms - DUE_AGE_GRACES * grace_ms for i in due))


def _named(storage: Storage, directory: str, versions: Iterable[int]) -> tuple[set[str], int]:
    """The objects the manifests of ``versions`` name, and how many of them could be read."""
    named: set[str] = set()
    readable = 0
    for v in versions:
        try:
            manifest = Manifest.from_json(storage.get(_path(directory, v)))
        except (ValueError, FileNotFoundError):
            continue
        readable += 1
        named.update(c.name for s in manifest.segments for c in s.chunks)
    return named, readable


def collect_garbage(storage: Storage, directory: str, now_ms: int, grace_ms: int, keep: int = KEEP_MANIFESTS,
                    unnamed_grace_ms: int | None = None) -> int:
    """Delete manifests below the newest ``keep``, and objects none of the kept ones references, when older
    than ``grace_ms``. With ``unnamed_grace_ms``, an object no manifest ever named (all versions listed are read)
    goes only once older than that: it may be a writer's that has not committed its manifest yet (a task whose
    executor was lost, still running), not one a later manifest replaced. Returns how many objects
    (manifests included) were deleted."""
    listed = storage.list(manifest_dir(directory))
    by_version = _by_version(listed)
    versions = sorted(by_version, reverse=True)
    old = now_ms - grace_ms
    strays = [i.name for i in listed if i not in by_version.values() and i.mtime_ms <= old]  # a killed writer's
    kept = [v for i, v in enumerate(versions) if i < keep or by_version[v].mtime_ms > old]
    referenced, readable = _named(storage, directory, kept)
    if versions and not readable:
        return 0  # nothing says which objects are in use: delete none
    replaced = None if unnamed_grace_ms is None else _named(storage, directory, (v for v in versions if v not in kept))[0]
    unnamed_old = now_ms - (grace_ms if unnamed_grace_ms is None else max(grace_ms, unnamed_grace_ms))
    doomed = [_name(v) for v in versions if v not in kept] + strays
    for name in doomed:
        storage.delete(posixpath.join(manifest_dir(directory), name))
    deleted = len(doomed)
    for info in storage.list(objects_dir(directory)):
        due = old if replaced is None or info.name in replaced else unnamed_old
        if info.name not in referenced and info.mtime_ms <= due:
            storage.delete(posixpath.join(objects_dir(directory), info.name))
            deleted += 1
    return deleted
