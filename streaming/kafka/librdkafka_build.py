"""What the librdkafka that confluent-kafka loaded knows: its configuration properties and its features; and
the C extension that moves records between that library and column buffers, bound to it.

A refused setting is easier to fix with the nearest real name ("did you mean security.protocol?") and, for
SASL, the mechanisms this build has. Both are read from the library itself through its C API
(``rd_kafka_conf_properties_show``, ``rd_kafka_conf_get``), so they match the build in use, not a list
kept here that drifts with every release. Where the library cannot be found (a platform whose wheel
places it elsewhere), nothing is suggested and librdkafka's own message stands.
"""

from __future__ import annotations

import ctypes
import functools
import glob
import os
import re
import tempfile
from types import ModuleType

import confluent_kafka

from streaming.kafka import _rdkafka_columns

# librdkafka's feature flags -> the sasl.mechanism values they provide.
MECHANISMS = {"sasl_gssapi": ("GSSAPI",), "sasl_plain": ("PLAIN",),
              "sasl_scram": ("SCRAM-SHA-256", "SCRAM-SHA-512"), "sasl_oauthbearer": ("OAUTHBEARER",)}
_PROPERTY_ROW = re.compile(r"^([a-z][\w.-]*)\s+\|", re.M)


PRODUCER, CONSUMER = 0, 1  # librdkafka's rd_kafka_type_t
DEFAULT_CLIENT_ID = "rdkafka"  # librdkafka's client.id, the start of its handles' names
SYSTEM_LIBRARY = "librdkafka.so.1"  # a confluent-kafka built against the system's librdkafka


@functools.lru_cache(maxsize=1)
def library_path() -> str | None:
    """Where the librdkafka that confluent-kafka loaded is: its wheel's copy, else the system's by soname."""
    package = os.path.dirname(confluent_kafka.__file__)
    for pattern in ("confluent_kafka.libs/librdkafka*", "confluent_kafka/.dylibs/librdkafka*"):
        found = sorted(glob.glob(os.path.join(os.path.dirname(package), pattern)))
        if found:
            return found[0]
    try:
        ctypes.CDLL(SYSTEM_LIBRARY)
    except OSError:
        return None
    return SYSTEM_LIBRARY


class LibraryNotFound(RuntimeError):
    """The librdkafka confluent-kafka loaded is not where this platform's wheels put it."""


class HandleNotFound(RuntimeError):
    """This confluent-kafka's clients do not keep their librdkafka handle where kcompact reads it."""


@functools.lru_cache(maxsize=1)
def columns() -> ModuleType:
    """The C extension that moves records between librdkafka and column buffers, bound to this library."""
    path = library_path()
    if path is None:
        raise LibraryNotFound("the librdkafka confluent-kafka loaded cannot be found")
    _rdkafka_columns.bind(path)
    return _rdkafka_columns


def handle(client: object, kind: int, client_id: str) -> int:
    """The address of a confluent-kafka client's rd_kafka_t, which its Handle holds right after PyObject_HEAD;
    checked to be the handle of a librdkafka client of ``kind`` (PRODUCER, CONSUMER) named after ``client_id``,
    as librdkafka names its handles ("client.id#consumer-1")."""
    address = ctypes.c_void_p.from_address(id(client) + object.__basicsize__).value or 0
    name = columns().handle_name(address, kind)
    role = "producer" if kind == PRODUCER else "consumer"
    if name is None or not name.startswith(f"{client_id}#{role}-"):
        raise HandleNotFound(f"this confluent-kafka's {type(client).__name__} does not keep its librdkafka handle "
                             f"where kcompact reads it; install a confluent-kafka of the versions pyproject.toml names")
    return address


@functools.lru_cache(maxsize=1)
def _library() -> ctypes.CDLL | None:
    path = library_path()
    return None if path is None else ctypes.CDLL(path)


@functools.lru_cache(maxsize=1)
def properties() -> frozenset[str]:
    """Every configuration property name this build accepts (global and topic-level)."""
    lib = _library()
    if lib is None:
        return frozenset()
    libc = ctypes.CDLL(None)
    libc.fopen.restype = ctypes.c_void_p
    with tempfile.NamedTemporaryFile(mode="r", encoding="utf-8") as table:
        handle = libc.fopen(table.name.encode(), b"w")
        if not handle:
            return frozenset()
        lib.rd_kafka_conf_properties_show(ctypes.c_void_p(handle))
        libc.fclose(ctypes.c_void_p(handle))
        return frozenset(_PROPERTY_ROW.findall(table.read()))


@functools.lru_cache(maxsize=1)
def features() -> frozenset[str]:
    """The features this build was compiled with (``builtin.features``), e.g. ssl, sasl_scram."""
    lib = _library()
    if lib is None:
        return frozenset()
    lib.rd_kafka_conf_new.restype = ctypes.c_void_p
    conf = ctypes.c_void_p(lib.rd_kafka_conf_new())
    try:
        size = ctypes.c_size_t(1024)
        value = ctypes.create_string_buffer(size.value)
        if lib.rd_kafka_conf_get(conf, b"builtin.features", value, ctypes.byref(size)) != 0:
            return frozenset()
        return frozenset(f.strip() for f in value.value.decode().split(","))
    finally:
        lib.rd_kafka_conf_destroy(conf)


def sasl_mechanisms() -> tuple[str, ...]:
    """The sasl.mechanism values this build supports."""
    built = features()
    return tuple(m for flag, names in MECHANISMS.items() if flag in built for m in names)
