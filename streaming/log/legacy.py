"""Logs written before manifests (kcompact 0.1: segment files appended in place, a JSON sidecar each, and
Kafka's cleaner-offset-checkpoint file), taken over on first open so an upgrade loses nothing accepted.

Each segment file is copied whole into an object and the sidecar becomes its description; the first
manifest commits them all with the checkpoint, and only then are the old files removed (a crash before
that leaves them, and the takeover runs again). The old layout cut an active segment that had grown past
its sidecar back to whole records on open; its bytes beyond the sidecar are an append no micro-batch
commit covered, so they are left out here too and Spark replays that batch.
"""

from __future__ import annotations

import io
import json
import logging
import posixpath

from streaming.errors import UserError
from streaming.log.manifest import Manifest, commit, objects_dir
from streaming.log.segment import Chunk, CorruptSegmentError, SegmentMeta, object_crc32, object_name, read_header
from streaming.log.storage import Storage

log = logging.getLogger(__name__)

OLD_SEGMENT = ".avro"
OLD_SIDECAR = ".meta.json"
OLD_CHECKPOINT = "cleaner-offset-checkpoint"
OLD_LEFTOVERS = (".cleaned", ".tmp", "log.json")  # what the old layout discarded or no longer needs
COPY_CHUNK = 8 << 20


class LegacyLogError(UserError, RuntimeError):
    pass


def has_legacy_log(storage: Storage, directory: str) -> bool:
    return any(_base(i.name) is not None for i in storage.list(directory))


def _base(name: str) -> int | None:
    stem = name[: -len(OLD_SEGMENT)] if name.endswith(OLD_SEGMENT) else ""
    return int(stem) if len(stem) == 20 and stem.isdigit() else None


def take_over(storage: Storage, directory: str) -> Manifest:
    """Commit manifest version 0 from the old files; raises LegacyLogError for what it cannot vouch for."""
    names = {i.name for i in storage.list(directory)}
    if any(n.endswith(".swap") for n in names):
        raise LegacyLogError(f"{directory}: an old-layout segment swap was interrupted (a .swap file); open the "
                             f"log once with kcompact 0.1 to complete it, or rebuild the partition from the source")
    sidecars = {}
    for base in sorted(b for b in map(_base, names) if b is not None):
        name = f"{base:020d}"
        if name + OLD_SIDECAR not in names:
            raise LegacyLogError(f"{directory}: old-layout segment {name} has no sidecar; open the log once with "
                                 f"kcompact 0.1 to rebuild it, or rebuild the partition from the source")
        sidecars[name] = json.loads(storage.get(posixpath.join(directory, name + OLD_SIDECAR)))
        _check(storage, directory, name + OLD_SEGMENT, sidecars[name])  # all of them before anything is written
    segments = [_copied(storage, directory, name + OLD_SEGMENT, doc) for name, doc in sidecars.items()]
    checkpoint = None
    if OLD_CHECKPOINT in names:
        lines = storage.get(posixpath.join(directory, OLD_CHECKPOINT)).decode().split("\n")
        checkpoint = int(lines[2].split()[2])
    manifest = Manifest(0, segments or [SegmentMeta.new(0)], checkpoint)
    commit(storage, directory, manifest, -1)
    for n in names:
        if _base(n) is not None or n.endswith(OLD_SIDECAR) or n == OLD_CHECKPOINT or n.endswith(OLD_LEFTOVERS):
            storage.delete(posixpath.join(directory, n))
    log.warning("%s: took over %d segments of the old layout into objects and manifests", directory, len(segments))
    return manifest


def _check(storage: Storage, directory: str, file_name: str, doc: dict) -> None:
    """The file's first ``file_bytes`` bytes are what its sidecar says they are."""
    length, crc = int(doc["file_bytes"]), int(doc["crc32"])
    if not int(doc.get("record_count", 0)):
        return
    try:
        got = object_crc32(storage, posixpath.join(directory, file_name), length)
    except CorruptSegmentError as exc:
        raise LegacyLogError(f"{directory}/{file_name}: damaged ({exc}); restore it or rebuild the partition") from None
    if got != crc:
        raise LegacyLogError(f"{directory}/{file_name}: damaged (CRC-32 {got:08x} over {length} bytes; its sidecar "
                             f"records {crc:08x}); restore it or rebuild the partition")


def _copied(storage: Storage, directory: str, file_name: str, doc: dict) -> SegmentMeta:
    """The segment as one object: the file's first ``file_bytes`` bytes (checked before, by _check)."""
    length, crc = int(doc["file_bytes"]), int(doc["crc32"])
    meta = SegmentMeta.from_dict(doc)
    if not meta.record_count:
        meta.sync = SegmentMeta.new(meta.base_offset).sync
        return meta
    name = object_name(meta.base_offset)
    copied = 0
    with storage.open_read(posixpath.join(directory, file_name)) as src, \
            storage.open_put(posixpath.join(objects_dir(directory), name)) as dst:
        data = src.read(min(COPY_CHUNK, length))
        _, sync, _ = read_header(io.BytesIO(data))
        while data:
            dst.write(data)
            copied += len(data)
            data = src.read(min(COPY_CHUNK, length - copied))
    meta.sync = sync.hex()
    meta.chunks = (Chunk(name, length, crc),)
    return meta
