"""The one storage interface the log uses: objects, written whole and never changed.

Object stores (S3, GCS) offer neither append nor rename, so the log asks for neither: it writes every
batch and every cleaned segment as a new object under a unique name, and commits by creating the next
manifest with put-if-absent, the one conditional write the stores have. That same write is what fences
a second writer of a partition (a zombie task of a dead driver): it finds its manifest version taken.

Two implementations:
- ``LocalStorage``: plain ``os`` calls, the default and the fast path. Whole-object writes go through a
  temporary name (fsynced, then renamed, so a reader never sees half an object); put-if-absent is a
  hard link, which POSIX makes fail when the name exists. Given a ``Barrier``, its writes are not fsynced
  one by one: the barrier makes every write before it durable at once (a task of many logs asks the disk
  a few times a stage, not several times a log).
- ``ArrowStorage`` (streaming.log.arrow_storage): any ``pyarrow.fs.FileSystem`` (S3, GCS, HDFS), each
  call tried until the store answers, and said while it waits (store_watch).
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import threading
import uuid
from dataclasses import dataclass
from typing import BinaryIO, Iterator, Protocol


TMP_MARK = ".tmp-"  # a local object still being written (listed: one a killed writer left is garbage)


@dataclass(frozen=True)
class ObjectInfo:
    name: str  # within the listed directory
    size: int
    mtime_ms: int


class Storage(Protocol):
    def list(self, directory: str) -> list[ObjectInfo]: ...
    def names(self, directory: str) -> list[str]: ...  # list's names alone, in no order (local: no stat of each)
    def subdirs(self, directory: str) -> list[str]: ...
    def exists(self, path: str) -> bool: ...
    def get(self, path: str) -> bytes: ...
    def open_read(self, path: str) -> contextlib.AbstractContextManager[BinaryIO]: ...  # read front to back
    def put(self, path: str, data: bytes) -> None: ...
    def open_put(self, path: str) -> contextlib.AbstractContextManager[BinaryIO]: ...
    def put_if_absent(self, path: str, data: bytes) -> bool: ...
    def delete(self, path: str) -> None: ...


_LIBC = ctypes.CDLL(None, use_errno=True)


def syncfs(fd: int) -> None:
    """Every write to the file system that holds ``fd`` made durable: Linux's syncfs(2)."""
    if _LIBC.syncfs(fd) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


class Barrier:
    """The point before which every write owed to it is durable: one syncfs of each file system written, for all
    the logs of a task at once. Objects and journal entries written before a crossing are durable before the
    manifests made after it name them, which is all a crash or a power cut needs: a durable manifest never
    names an object it lost. A manifest made after the last crossing is durable at the file system's next sync.

    A write is owed before its first byte: the file system's descriptor that syncfs is given is opened then, and
    syncfs (Linux 5.8 and later) reports every write-back error since its descriptor was opened; one opened at
    the crossing would miss an error of a write-back made before it. A crossing that fails fails every later one
    too: what was written before it may be lost, so no manifest may name it. The descriptors stay open until the
    barrier is closed."""

    def __init__(self) -> None:
        self._fds: dict[int, int] = {}  # a directory's descriptor, by its file system's device
        self._owed: set[int] = set()
        self._failed: OSError | None = None
        self._lock = threading.Lock()

    def owe(self, device: int, directory: str) -> None:
        """A write to ``directory``, on the file system ``device``, about to be made: durable at the next
        crossing."""
        with self._lock:
            if device not in self._fds:
                self._fds[device] = os.open(directory, os.O_RDONLY)
            self._owed.add(device)

    def owe_directory(self, directory: str) -> None:
        """What ``directory`` holds already (an earlier attempt's writes, perhaps still in the page cache) is to be
        durable at the next crossing too."""
        try:
            device = os.stat(directory).st_dev
        except FileNotFoundError:  # nothing written there yet
            return
        self.owe(device, directory)

    def cross(self) -> None:
        with self._lock:
            if self._failed is not None:
                raise self._failed
            for device in sorted(self._owed):
                try:
                    syncfs(self._fds[device])
                except OSError as exc:
                    self._failed = exc
                    raise
            self._owed.clear()

    def close(self) -> None:
        with self._lock:
            for fd in self._fds.values():
                os.close(fd)
            self._fds.clear()

    def __enter__(self) -> "Barrier":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class LocalStorage:
    """Local disk. Objects appear whole or not at all; with ``fsync`` they are durable once written, or, given a
    ``barrier``, once it is crossed."""

    def __init__(self, fsync: bool = True, barrier: Barrier | None = None) -> None:
        self.fsync = fsync
        self.barrier = barrier if fsync else None

    def list(self, directory: str) -> list[ObjectInfo]:
        try:
            entries = list(os.scandir(directory))
        except FileNotFoundError:
            return []
        out = []
        for e in entries:
            try:
                if not e.is_file():
                    continue
                st = e.stat()
            except FileNotFoundError:  # renamed or removed since the directory was read
                continue
            out.append(ObjectInfo(e.name, st.st_size, int(st.st_mtime * 1000)))
        return sorted(out, key=lambda i: i.name)

    def names(self, directory: str) -> list[str]:
        try:
            return [e.name for e in os.scandir(directory) if e.is_file()]
        except FileNotFoundError:
            return []

    def subdirs(self, directory: str) -> list[str]:
        try:
            return sorted(e.name for e in os.scandir(directory) if e.is_dir())
        except FileNotFoundError:
            return []

    def exists(self, path: str) -> bool:
        return os.path.exists(path)

    def get(self, path: str) -> bytes:
        with open(path, "rb") as f:
            return f.read()

    def open_read(self, path: str) -> contextlib.AbstractContextManager[BinaryIO]:
        return open(path, "rb")

    @contextlib.contextmanager
    def _staged(self, path: str) -> Iterator[tuple[BinaryIO, str]]:
        """A temporary file beside ``path``, removed if the body fails (one that succeeds has moved it or removed
        it)."""
        tmp = f"{path}{TMP_MARK}{uuid.uuid4().hex}"
        try:
            with _created(tmp) as f:
                if self.barrier is not None:
                    self.barrier.owe(os.fstat(f.fileno()).st_dev, os.path.dirname(path) or ".")
                yield f, tmp
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.remove(tmp)
            raise

    def _synced(self, f: BinaryIO) -> None:
        f.flush()
        if self.fsync and self.barrier is None:  # one owed to a barrier is durable when it is crossed
            os.fsync(f.fileno())

    @contextlib.contextmanager
    def open_put(self, path: str) -> Iterator[BinaryIO]:
        with self._staged(path) as (f, tmp):
            yield f
            self._synced(f)
            os.replace(tmp, path)
        self._sync_dir(path)

    def put(self, path: str, data: bytes) -> None:
        with self.open_put(path) as f:
            f.write(data)

    def put_if_absent(self, path: str, data: bytes) -> bool:
        with self._staged(path) as (f, tmp):
            f.write(data)
            self._synced(f)
            try:
                os.link(tmp, path)
            except FileExistsError:
                return False
            finally:
                os.remove(tmp)
        self._sync_dir(path)
        return True

    def delete(self, path: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.remove(path)

    def _sync_dir(self, path: str) -> None:
        if not self.fsync or self.barrier is not None:  # the barrier's syncfs takes the directory too
            return
        fd = os.open(os.path.dirname(path) or ".", os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _created(path: str) -> BinaryIO:
    """A new file, its directory made when it is missing: tried once an open fails, not before each put."""
    try:
        return open(path, "wb")
    except FileNotFoundError:  # the first object of a directory
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        return open(path, "wb")


def write_json(storage: Storage, path: str, doc: object, indent: int | None = 1) -> None:
    """A JSON document, replaced whole: a reader beside a running job (status) or a restart after a crash
    sees the old document or the new one, never half of one."""
    storage.put(path, json.dumps(doc, indent=indent, sort_keys=True).encode())


def read_json(storage: Storage, path: str) -> dict | None:
    """The document, or None when there is none yet."""
    try:
        return json.loads(storage.get(path))
    except FileNotFoundError:
        return None
