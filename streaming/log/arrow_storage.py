"""The log's storage on any pyarrow filesystem (S3, GCS, HDFS), each call tried until the store answers.

pyarrow is chosen over fsspec because it is already a hard dependency and its filesystems are C++. It has no
conditional write, so the store's own one is handed in (see streaming.state.stores), and it cannot say
which of its errors mean "no answer", so the store's own judge of that is handed in too.

A call is tried again only where that is safe:
- a read resumes where the failed attempt left off (a ranged read of the rest);
- a write is spooled first (memory, then a temporary file), so an attempt that fails mid-upload is sent
  again whole. A part-written object left by a failure is never referenced by a manifest, and the next
  attempt replaces it;
- a put-if-absent that finds the object there after an attempt the store did not answer reads it back: the
  lost attempt may have been its own, and the object holds this writer's bytes only if it was.
"""

from __future__ import annotations

import contextlib
import os
import shutil
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

    def subdirs(self, directory: str) -> list[str]:
        from pyarrow.fs import FileType  # noqa: PLC0415

        return sorted(os.path.basename(i.path) for i in self._infos(directory) if i.type == FileType.Directory)

    def exists(self, path: str) -> bool:
        from pyarrow.fs import FileType  # noqa: PLC0415

        return self.answered(f"a look at {path}", lambda: self.fs.get_file_info(path).type != FileType.NotFound)

    def get(self, path: str) -> bytes:
        return self.answered(f"a read of {path}", lambda: self._read_all(path))

    def _read_all(self, path: str) -> bytes:
        with self.fs.open_input_stream(path) as f:
            return f.read()

    @contextlib.contextmanager
    def open_read(self, path: str) -> Iterator[BinaryIO]:
        """Sequential: every reader of the log reads an object front to back, and a stream is one
        download, where a random-access file on a store is a ranged request per read."""
        reader = ResumedRead(self, path)
        try:
            yield reader  # type: ignore[misc]
        finally:
            reader.close()

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
            shutil.copyfileobj(source, out, COPY_BYTES)
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


class ResumedRead:
    """An object read front to back; a read the store drops resumes at the same byte, on a new request."""

    def __init__(self, storage: ArrowStorage, path: str) -> None:
        self._storage, self._path, self._what = storage, path, f"a read of {path}"
        self._at = 0  # bytes handed to the reader so far
        self._stream: pyarrow.NativeFile | None = storage.answered(self._what, lambda: storage.fs.open_input_stream(path))

    def _once(self, op: Callable[[pyarrow.NativeFile], T]) -> T:
        if self._stream is None:
            stream = self._storage.fs.open_input_file(self._path)
            stream.seek(self._at)
            self._stream = stream
        try:
            return op(self._stream)
        except OSError:
            self._drop()
            raise

    def _drop(self) -> None:
        stream, self._stream = self._stream, None
        with contextlib.suppress(OSError):
            if stream is not None:
                stream.close()

    def read(self, size: int | None = -1) -> bytes:
        data = self._storage.answered(self._what, lambda: self._once(
            lambda s: s.read() if size is None or size < 0 else s.read(size)))
        self._at += len(data)
        return data

    def readinto(self, buffer) -> int:
        got = self._storage.answered(self._what, lambda: self._once(lambda s: s.readinto(buffer)))
        self._at += got
        return got

    def close(self) -> None:
        self._drop()
