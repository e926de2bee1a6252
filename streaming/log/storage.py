"""The one filesystem interface the log uses, so a cluster can keep its logs on shared storage.

The operations are the few a segmented log needs: whole-file writes, appends of whole Avro blocks,
atomic renames (the segment swap), truncation (torn-tail recovery) and listing.

Two implementations:
- ``LocalStorage``: plain ``os`` calls with fsync, the default and the fast path on local disk.
- ``ArrowStorage``: any ``pyarrow.fs.FileSystem`` (HDFS, S3, GCS, Azure, local). pyarrow.fs was chosen
  over fsspec because pyarrow is already a hard dependency (Spark's Arrow path), its filesystems are C++
  with no per-call Python overhead, and it is the filesystem layer Spark's own Python tooling uses. Its
  append stream exists on local disk and HDFS; object stores cannot append, so there the active segment
  needs a filesystem that can (HDFS, a mounted volume) — a limit of the stores, not of this interface.
"""

from __future__ import annotations

import contextlib
import os
from typing import TYPE_CHECKING, BinaryIO, Iterator, Protocol

if TYPE_CHECKING:
    import pyarrow.fs


class Storage(Protocol):
    def makedirs(self, path: str) -> None: ...
    def listdir(self, path: str) -> list[str]: ...
    def exists(self, path: str) -> bool: ...
    def size(self, path: str) -> int: ...
    def read(self, path: str) -> bytes: ...
    def open_read(self, path: str) -> contextlib.AbstractContextManager[BinaryIO]: ...
    def open_write(self, path: str) -> contextlib.AbstractContextManager[BinaryIO]: ...
    def write(self, path: str, data: bytes) -> None: ...
    def append(self, path: str, data: bytes) -> None: ...
    def rename(self, src: str, dst: str) -> None: ...
    def delete(self, path: str) -> None: ...
    def truncate(self, path: str, size: int) -> None: ...


class LocalStorage:
    """Local disk. Writes and appends are fsynced when ``fsync`` is set, renames are atomic (POSIX)."""

    def __init__(self, fsync: bool = True) -> None:
        self.fsync = fsync

    def makedirs(self, path: str) -> None:
        os.makedirs(path, exist_ok=True)

    def listdir(self, path: str) -> list[str]:
        return sorted(os.listdir(path))

    def exists(self, path: str) -> bool:
        return os.path.exists(path)

    def size(self, path: str) -> int:
        return os.path.getsize(path)

    def read(self, path: str) -> bytes:
        with open(path, "rb") as f:
            return f.read()

    def open_read(self, path: str) -> contextlib.AbstractContextManager[BinaryIO]:
        return open(path, "rb")  # noqa: SIM115 (returned as a context manager)

    @contextlib.contextmanager
    def open_write(self, path: str) -> Iterator[BinaryIO]:
        with open(path, "wb") as f:
            yield f
            self._sync(f)

    def write(self, path: str, data: bytes) -> None:
        with self.open_write(path) as f:
            f.write(data)

    def append(self, path: str, data: bytes) -> None:
        with open(path, "ab") as f:
            f.write(data)
            self._sync(f)

    def rename(self, src: str, dst: str) -> None:
        os.replace(src, dst)
        if self.fsync:
            self._sync_dir(os.path.dirname(dst) or ".")

    def delete(self, path: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.remove(path)

    def truncate(self, path: str, size: int) -> None:
        with open(path, "r+b") as f:
            f.truncate(size)
            self._sync(f)

    def _sync(self, f: BinaryIO) -> None:
        if self.fsync:
            f.flush()
            os.fsync(f.fileno())

    @staticmethod
    def _sync_dir(path: str) -> None:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


class ArrowStorage:
    """Any pyarrow filesystem. Truncation is a rewrite of the kept prefix plus an atomic move."""

    def __init__(self, fs: pyarrow.fs.FileSystem) -> None:
        self.fs = fs

    def makedirs(self, path: str) -> None:
        self.fs.create_dir(path, recursive=True)

    def listdir(self, path: str) -> list[str]:
        from pyarrow.fs import FileSelector  # noqa: PLC0415

        return sorted(os.path.basename(i.path) for i in self.fs.get_file_info(FileSelector(path)))

    def exists(self, path: str) -> bool:
        from pyarrow.fs import FileType  # noqa: PLC0415

        return self.fs.get_file_info(path).type != FileType.NotFound

    def size(self, path: str) -> int:
        return self.fs.get_file_info(path).size

    def read(self, path: str) -> bytes:
        with self.fs.open_input_stream(path) as f:
            return f.read()

    def open_read(self, path: str) -> contextlib.AbstractContextManager[BinaryIO]:
        return self.fs.open_input_file(path)

    def open_write(self, path: str) -> contextlib.AbstractContextManager[BinaryIO]:
        return self.fs.open_output_stream(path)

    def write(self, path: str, data: bytes) -> None:
        with self.fs.open_output_stream(path) as f:
            f.write(data)

    def append(self, path: str, data: bytes) -> None:
        with self.fs.open_append_stream(path) as f:
            f.write(data)

    def rename(self, src: str, dst: str) -> None:
        self.fs.move(src, dst)

    def delete(self, path: str) -> None:
        if self.exists(path):
            self.fs.delete_file(path)

    def truncate(self, path: str, size: int) -> None:
        with self.fs.open_input_file(path) as f:
            kept = f.read(size)
        tmp = path + ".truncating"
        self.write(tmp, kept)
        self.fs.move(tmp, path)
