"""The log's storage on any pyarrow filesystem (S3, GCS, HDFS), each call tried until the store answers.

pyarrow is chosen over fsspec because it is already a hard dependency and its filesystems are C++. It has no
conditional write, so the store's own one is handed in (see streaming.state.stores), and it cannot say
which of its errors mean "no answer", so the store's own judge of that is handed in too.

A call is tried again only where that is safe:
- a read of a stream is tried again at the same position: on S3 each read is a ranged request of its own,
  and one that failed moved nothing;
- a write is spooled first (in memory, then in a temporary file under TMPDIR), so an attempt that fails
  mid-upload is sent again whole. A failed multipart upload may leave its parts on the store (a bucket's
  rule to abort incomplete uploads removes them), or a part-written object under its name: never one a
  manifest references, since objects are written before the manifest that names them (and on S3 a JSON
  document goes up in one PUT: all or nothing);
- a put-if-absent that finds the object there after an attempt the store did not answer reads it back: the
  lost attempt may have been its own, and it was if the object holds this writer's bytes. Two writers
  whose bytes are equal (the same roll of the same version) both see their commit: the log is the same.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from typing import TYPE_CHECKING, BinaryIO, Callable, Iterator, TypeVar

from streaming.log.storage import ObjectInfo
from streaming.log.store_watch import WATCH, StoreUnanswered

if TYPE_CHECKING:
    import pyarrow.fs

T = TypeVar("T")

SPOOL_IN_MEMORY = 64 << 20  # a write larger than this is spooled to a temporary file
COPY_BYTES = 8 << 20


def _never(_exc: OSError) -> bool:
    return False


class ArrowStorage:
    """``put_if_absent(path, data) -> bool`` is the store's conditional create; ``unanswered(error)`` says
    whether one of pyarrow's errors is a call the store did not answer (tried again) or a refusal."""

    def __init__(self, fs: pyarrow.fs.FileSystem, put_if_absent: Callable[[str, bytes], bool],
                 unanswered: Callable[[OSError], bool] = _never) -> None:
        self.fs = fs
        self._put_if_absent = put_if_absent
        self._unanswered = unanswered

    def _attempt(self, call: Callable[[], T]) -> T:
        """One attempt: pyarrow's error the store did not answer becomes StoreUnanswered."""
        try:
            return call()
        except (StoreUnanswered, FileNotFoundError):
            raise
        except OSError as exc:
            if self._unanswered(exc):
                raise StoreUnanswered(str(exc)) from exc
            raise

    def answered(self, what: str, call: Callable[[], T]) -> T:
        return WATCH.answered(what, lambda: self._attempt(call))

    def _infos(self, directory: str) -> list[pyarrow.fs.FileInfo]:
        from pyarrow.fs import FileSelector  # noqa: PLC0415

        return self.answered(f"a listing of {directory}",
                             lambda: self.fs.get_file_info(FileSelector(directory, allow_not_found=True)))

    def list(self, directory: str) -> list[ObjectInfo]:
        from pyarrow.fs import FileType  # noqa: PLC0415

        return sorted((ObjectInfo(os.path.basename(i.path), i.size, int(i.mtime.timestamp() * 1000) if i.mtime else 0)
                       for i in self._infos(directory) if i.type == FileType.File), key=lambda i: i.name)

    def names(self, directory: str) -> list[str]:
        return [i.name for i in self.list(directory)]

    def subdirs(self, directory: str) -> list[str]:
        from pyarrow.fs import FileType  # noqa: PLC0415

        return sorted(os.path.basename(i.path) for i in self._infos(directory) if i.type == FileType.Directory)

    def exists(self, path: str) -> bool:
        from pyarrow.fs import FileType  # noqa: PLC0415

        return self.answered(f"a look at {path}", lambda: self.fs.get_file_info(path).type != FileType.NotFound)

    def get(self, path: str) -> bytes:
        return self.answered(f"a read of {path}", lambda: self._read_all(path))

    def _read_all(self, path: str) -> bytes:
        parts = []
        with self.fs.open_input_stream(path) as f:
            while part := f.read(COPY_BYTES):
                parts.append(part)
                WATCH.moved()
        return b"".join(parts)

    @contextlib.contextmanager
    def open_read(self, path: str) -> Iterator[BinaryIO]:
        """Front to back, in large reads (every reader of the log reads so): a read is a request on a store."""
        what = f"a read of {path}"
        stream = self.answered(what, lambda: self.fs.open_input_stream(path))
        try:
            yield _WatchedRead(self, stream, what)  # type: ignore[misc]
        finally:
            with contextlib.suppress(OSError):
                stream.close()

    @contextlib.contextmanager
    def open_put(self, path: str) -> Iterator[BinaryIO]:
        """Published when the block ends without an error; nothing is written when it raises."""
        with tempfile.SpooledTemporaryFile(SPOOL_IN_MEMORY) as spool:
            yield spool  # type: ignore[misc]
            self._upload(path, spool)

    def put(self, path: str, data: bytes) -> None:
        with self.open_put(path) as f:
            f.write(data)

    def _upload(self, path: str, source: BinaryIO) -> None:
        def once() -> None:
            source.seek(0)
            out = self._open_output(path)
            while part := source.read(COPY_BYTES):
                out.write(part)
                WATCH.moved()
            out.close()  # an object store publishes the object here

        self.answered(f"a write of {path}", once)

    def _open_output(self, path: str) -> BinaryIO:
        try:
            return self.fs.open_output_stream(path)
        except FileNotFoundError:  # a filesystem with real directories (object stores have none)
            self.fs.create_dir(os.path.dirname(path), recursive=True)
            return self.fs.open_output_stream(path)

    def put_if_absent(self, path: str, data: bytes) -> bool:
        lost_one = False  # an attempt the store did not answer: it may have created the object

        def once() -> bool:
            nonlocal lost_one
            try:
                created = self._attempt(lambda: self._put_if_absent(path, data))
            except StoreUnanswered:
                lost_one = True
                raise
            return created or (lost_one and self._attempt(lambda: self._read_all(path)) == data)

        return WATCH.answered(f"a write of {path}", once)

    def delete(self, path: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.answered(f"a delete of {path}", lambda: self.fs.delete_file(path))


class _WatchedRead:
    """A stream whose every read is a call tried until the store answers."""

    def __init__(self, storage: ArrowStorage, stream: pyarrow.NativeFile, what: str) -> None:
        self._storage, self._stream, self._what = storage, stream, what

    def read(self, size: int | None = -1) -> bytes:
        whole = size is None or size < 0
        return self._storage.answered(self._what, lambda: self._stream.read() if whole else self._stream.read(size))

    def readinto(self, buffer) -> int:
        return self._storage.answered(self._what, lambda: self._stream.readinto(buffer))
