"""The native path: records moved between librdkafka and column buffers by the C extension ``_rdkafka_columns``,
on confluent-kafka's own client handles; and whether it may run in this process.

The extension reads the ``rd_kafka_t`` a confluent-kafka client object holds right after its PyObject_HEAD.
The versions in TESTED keep it there; another version may not, and reading there would crash the job instead
of failing it. So the client's version and its librdkafka's are checked against TESTED before any handle is
read, and anything else runs on the plain path (confluent-kafka's own per-record calls), said once, in a
WARNING naming what to install. ``--kafka-native off`` takes the plain path whatever the version.
"""

from __future__ import annotations

import functools
import importlib
import logging
from types import ModuleType

import confluent_kafka

from streaming.kafka.native.librdkafka_build import library_path

log = logging.getLogger(__name__)

# confluent-kafka -> the librdkafka its wheels carry, for every release the native path's tests passed with
# (python -m tests.client_versions runs them); pyproject.toml allows exactly these.
TESTED: dict[str, str] = {"2.14.2": "2.14.2", "2.15.0": "2.15.0", "2.15.1": "2.15.1", "2.16.0": "2.16.0",
                          "2.16.1": "2.16.0"}
NEWEST = "2.16.1"
PRODUCER, CONSUMER = 0, 1  # librdkafka's rd_kafka_type_t
DEFAULT_CLIENT_ID = "rdkafka"  # librdkafka's client.id, the start of its handles' names


class NativePathError(RuntimeError):
    """The native path cannot run with this client: a defect of kcompact's or of its install, never an outage.
    ``--kafka-native off`` goes round it."""


class HandleNotFound(NativePathError):
    """A client of a tested confluent-kafka does not keep its librdkafka handle where kcompact reads it."""


def _versions() -> tuple[str, str]:
    """(confluent-kafka's version, its librdkafka's): version() is a bare string in the tested releases, a
    (string, number) pair as its documentation has it."""
    version = confluent_kafka.version()
    return version[0] if isinstance(version, tuple) else version, confluent_kafka.libversion()[0]


def _client_problem() -> str | None:
    version, library = _versions()
    if TESTED.get(version) == library:
        return None
    return (f"confluent-kafka {version} with librdkafka {library} is not a version its native path was tested "
            f"with (pip install 'confluent-kafka=={NEWEST}')")


@functools.lru_cache(maxsize=1)
def unavailable() -> str | None:
    """Why the native path cannot run in this process, or None when it can. The versions come first: nothing
    of the extension runs for a client it was not tested with."""
    problem = _client_problem()
    if problem is not None:
        return problem
    try:
        extension = importlib.import_module("streaming.kafka.native._rdkafka_columns")
    except ImportError as exc:
        return f"its C extension is not built ({exc}; reinstall kcompact with a C compiler)"
    path = library_path()
    if path is None:
        return "the librdkafka confluent-kafka loaded cannot be found"
    try:
        extension.bind(path)
    except ImportError as exc:
        return str(exc)
    return None


def enabled(asked: bool) -> bool:
    """Whether records take the native path: asked for (``--kafka-native``), and able to run here."""
    return asked and unavailable() is None


def announce(asked: bool) -> None:
    """Say once, where the job starts, that the plain path is taken although the native one was asked for."""
    problem = unavailable() if asked else None
    if problem is not None:
        log.warning("records move through confluent-kafka's per-record calls, slower: %s; --kafka-native off "
                    "silences this", problem)


def columns() -> ModuleType:
    """The C extension, bound to the librdkafka confluent-kafka loaded."""
    problem = unavailable()
    if problem is not None:
        raise NativePathError(f"the native path cannot run: {problem}")
    return importlib.import_module("streaming.kafka.native._rdkafka_columns")


def check_handle(client: object, kind: int, client_id: str) -> None:
    """That a confluent-kafka client holds the rd_kafka_t of a librdkafka client of ``kind`` (PRODUCER, CONSUMER)
    named after ``client_id``, as librdkafka names its handles ("client.id#consumer-1"), right after its
    PyObject_HEAD, where the extension reads it; read only once the versions passed (columns())."""
    name = columns().handle_name(client, kind)
    role = "producer" if kind == PRODUCER else "consumer"
    if name is None or not name.startswith(f"{client_id}#{role}-"):
        raise HandleNotFound(f"this confluent-kafka's {type(client).__name__} does not keep its librdkafka handle "
                             f"where kcompact reads it; run with --kafka-native off")
