"""What the librdkafka that confluent-kafka loaded knows: where it is, its configuration properties and its
features.

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

import confluent_kafka

# librdkafka's feature flags -> the sasl.mechanism values they provide.
MECHANISMS = {"sasl_gssapi": ("GSSAPI",), "sasl_plain": ("PLAIN",),
              "sasl_scram": ("SCRAM-SHA-256", "SCRAM-SHA-512"), "sasl_oauthbearer": ("OAUTHBEARER",)}
_PROPERTY_ROW = re.compile(r"^([a-z][\w.-]*)\s+\|", re.M)

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
