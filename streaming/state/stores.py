"""Where a state dir lives: a local path, or a URI of any pyarrow filesystem (s3://, gs://, hdfs://, file://).

A plain path or file:// is a local directory (LocalStorage, the fast default). Anything else goes through
pyarrow.fs, which reads and writes every store alike but has no conditional write; each store's own
put-if-absent, the one operation the logs' fencing needs, is chosen here by scheme:
- s3://   a PUT with ``If-None-Match: *`` (S3 and S3-compatible servers), through boto3; each call under a
          deadline and tried again until the store answers (streaming.state.s3)
- gs://   an upload with ``ifGenerationMatch=0``, through google-cloud-storage (installed on demand)
- hdfs:// a rename onto the final name, which HDFS refuses when the name exists
S3 options ride on the URI as pyarrow reads them (``?endpoint_override=host:port&scheme=http&region=...``);
credentials come from the environment, as for every AWS client.
"""

from __future__ import annotations

import functools
import os
import posixpath
import uuid
from dataclasses import dataclass
from urllib.parse import urlparse

from streaming.errors import UserError
from streaming.log.arrow_storage import ArrowStorage
from streaming.log.storage import LocalStorage, Storage

SCHEMES = ("s3", "gs", "gcs", "hdfs")


class StateStoreError(UserError, ValueError):
    pass


@dataclass(frozen=True)
class StateDir:
    """A state dir: the user's URI, the storage it lives on and its root path within that storage."""

    uri: str
    storage: Storage
    root: str
    local: bool

    def path(self, *parts: str) -> str:
        return posixpath.join(self.root, *parts)


def is_local(uri: str) -> bool:
    scheme = urlparse(uri).scheme
    return scheme in ("", "file") or len(scheme) == 1  # a Windows drive letter is no scheme


@functools.lru_cache(maxsize=8)
def task_state_dir(uri: str) -> StateDir:
    """A task's state dir, opened without a look at the store: one that does not answer as a task starts
    is waited for by the task's first call, where a look would fail the task. One per URI per process:
    executors' tasks share their worker's filesystem client."""
    if is_local(uri):
        path = os.path.abspath(urlparse(uri).path if uri.startswith("file:") else uri)
        _refuse_a_file_in_the_way(uri, path)
        return StateDir(uri, LocalStorage(), path, True)
    scheme = urlparse(uri).scheme
    if scheme not in SCHEMES:
        raise StateStoreError(f"--state-dir {uri}: unsupported scheme {scheme}:// (use a local path, file://, "
                              f"s3://, gs:// or hdfs://)")
    from pyarrow import fs as pafs  # noqa: PLC0415 (the light commands on a local dir never need it)

    try:
        filesystem, root = pafs.FileSystem.from_uri(uri)
        storage = _storage(scheme, uri, filesystem)
    except (ValueError, OSError) as exc:  # pyarrow's ArrowInvalid is a ValueError
        raise StateStoreError(f"--state-dir {uri}: {exc}") from None
    return StateDir(uri, storage, root.rstrip("/"), False)


def open_state_dir(uri: str) -> StateDir:
    """The state dir at first contact (a command, the driver): one look at the store, once per process and
    one attempt only, so an unreachable store, a missing bucket or refused credentials is one clear line."""
    state = task_state_dir(uri)
    if not state.local and uri not in _LOOKED:
        _look(state, urlparse(uri).scheme)
        _LOOKED.add(uri)
    return state


_LOOKED: set[str] = set()


def _look(state: StateDir, scheme: str) -> None:
    from pyarrow.fs import FileSelector, FileType  # noqa: PLC0415

    bucket = state.root.split("/", 1)[0]
    try:
        if scheme in ("s3", "gs", "gcs") and state.storage.fs.get_file_info(bucket).type == FileType.NotFound:
            raise StateStoreError(f"--state-dir {state.uri}: bucket {bucket!r} does not exist; create it, or choose "
                                  f"another --state-dir")
        state.storage.fs.get_file_info(FileSelector(state.root, allow_not_found=True))
        if scheme == "s3":
            from streaming.state import s3  # noqa: PLC0415

            s3.look_with_conditional_client(state.storage.fs, bucket)
    except OSError as exc:
        raise StateStoreError(f"--state-dir {state.uri}: the store cannot be read: {str(exc).splitlines()[0].rstrip('.')}. "
                              f"Check the credentials in the environment (AWS_*, GOOGLE_APPLICATION_CREDENTIALS) and "
                              f"the address") from None


def check_access(state: StateDir, write: bool) -> None:
    """A local state dir the user cannot read (or, to run, write), or one on a read-only filesystem, is one
    clear line before anything is read or created. A dir not yet there is judged by the dir it would go in."""
    if not state.local:
        return
    existing = _nearest_existing(state.root)
    if write and os.statvfs(existing).f_flag & os.ST_RDONLY:
        raise StateStoreError(f"--state-dir {state.uri}: {existing} is on a read-only filesystem; choose a "
                              f"--state-dir on a writable one")
    # the state dir itself is read (and written); a dir it would be created in is entered (and written)
    need = (os.R_OK if existing == state.root else 0) | os.X_OK | (os.W_OK if write else 0)
    if not os.access(existing, need):
        what = "read and write" if write else "read"
        raise StateStoreError(f"--state-dir {state.uri}: permission denied on {existing} (kcompact needs to "
                              f"{what} it); give this user access (chmod/chown), or choose another --state-dir")
    if write and existing != state.root:
        _probe_creation(state.uri, existing, state.root)


def _probe_creation(uri: str, existing: str, root: str) -> None:
    """Make and remove the first missing dir: some filesystems refuse a new dir whatever the permissions say
    (sysfs, procfs, even to root), and a run must learn that before it creates anything elsewhere."""
    first = os.path.join(existing, os.path.relpath(root, existing).split(os.sep)[0])
    try:
        os.mkdir(first)
    except OSError as exc:
        raise StateStoreError(f"--state-dir {uri}: cannot create {first}: {exc.strerror}; choose a --state-dir "
                              f"on a filesystem that holds files") from None
    os.rmdir(first)


def _refuse_a_file_in_the_way(uri: str, path: str) -> None:
    """A state dir that is a file, or lies below one, is one clear line before anything is read or created."""
    existing = _nearest_existing(path)
    if not os.path.isdir(existing):
        where = "is a file" if existing == path else f"lies below {existing}, which is a file"
        raise StateStoreError(f"--state-dir {uri} {where}, not a directory")


def _nearest_existing(path: str) -> str:
    """The path itself when it exists, else the nearest ancestor that does (the one it would be created in)."""
    while not os.path.exists(path) and os.path.dirname(path) != path:
        path = os.path.dirname(path)
    return path


def _storage(scheme: str, uri: str, filesystem) -> ArrowStorage:
    if scheme == "s3":
        from streaming.state import s3  # noqa: PLC0415

        return s3.s3_storage(uri, filesystem)
    if scheme in ("gs", "gcs"):
        from streaming.state.gcs import GcsConditional  # noqa: PLC0415

        return ArrowStorage(filesystem, GcsConditional())
    return ArrowStorage(filesystem, functools.partial(_rename_if_absent, filesystem))


def _rename_if_absent(filesystem, path: str, data: bytes) -> bool:
    """HDFS: write beside, then rename; HDFS's rename fails when the destination exists."""
    tmp = f"{path}.tmp-{uuid.uuid4().hex}"
    with filesystem.open_output_stream(tmp) as f:
        f.write(data)
    try:
        filesystem.move(tmp, path)
        return True
    except OSError:
        filesystem.delete_file(tmp)
        from pyarrow.fs import FileType  # noqa: PLC0415

        if filesystem.get_file_info(path).type == FileType.NotFound:
            raise
        return False
