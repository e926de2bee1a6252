"""A Kafka tool's client properties (the file kafka-acls.sh takes with --command-config, an admin's
client.properties) as librdkafka settings, so that one file serves Kafka's tools and kcompact's --admin-config.

Java's clients and librdkafka share most names (security.protocol, sasl.mechanism, ssl.key.password, ...). Where
they differ, the Java form is translated: a SCRAM or PLAIN login in sasl.jaas.config becomes sasl.username and
sasl.password, and a PEM truststore or keystore becomes ssl.ca.location or ssl.certificate.location and
ssl.key.location. What librdkafka cannot read (a JKS store, a Kerberos login module) is one line naming the
key and the file. Every other key is passed on as it is, for librdkafka to judge when a client is made.
"""

from __future__ import annotations

import re
from typing import Mapping

from streaming.configuration import java_properties
from streaming.errors import UsageError

_JAAS_OPTION = re.compile(r'(\w+)\s*=\s*"((?:[^"\\]|\\.)*)"')
_PASSWORD_LOGINS = ("ScramLoginModule", "PlainLoginModule")
# Java's store types beside a location, which librdkafka has no key for
_STORE_TYPES = ("ssl.truststore.type", "ssl.keystore.type")


def read_client_properties(path: str, option: str) -> dict[str, str]:
    """The file's settings as librdkafka takes them; ``option`` names the flag that gave the file."""
    try:
        with open(path, encoding="utf-8") as f:
            props = java_properties.loads(f.read())
    except OSError as exc:
        raise UsageError(f"{option} {path}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise UsageError(f"{option} {path}: not a .properties file ({exc})") from None
    return librdkafka_settings(props, f"{option} {path}")


def librdkafka_settings(props: Mapping[str, str], where: str) -> dict[str, str]:
    """``where`` names the file in an error: ``--admin-config admin.properties``."""
    out: dict[str, str] = {}
    for key, value in props.items():
        if key in _STORE_TYPES:
            continue
        if key == "sasl.jaas.config":
            out.update(_login(value, where))
        elif key == "ssl.truststore.location":
            _need_pem(props, "ssl.truststore.type", where)
            out["ssl.ca.location"] = value
        elif key == "ssl.keystore.location" and props.get("ssl.keystore.type", "").upper() == "PEM":
            out["ssl.certificate.location"] = out["ssl.key.location"] = value  # one file: key and chain
        elif key == "ssl.keystore.location" and props.get("ssl.keystore.type", "JKS").upper() == "JKS":
            _need_pem(props, "ssl.keystore.type", where)
        else:
            out[key] = value  # a PKCS12 keystore librdkafka reads itself (ssl.keystore.location, .password)
    return out


def _login(jaas: str, where: str) -> dict[str, str]:
    module = jaas.split(None, 1)[0] if jaas.strip() else ""
    if not module.endswith(_PASSWORD_LOGINS):
        raise UsageError(f"{where}: sasl.jaas.config uses {module or 'no login module'}; kcompact reads SCRAM and "
                         f"PLAIN logins (ScramLoginModule, PlainLoginModule): give sasl.username and sasl.password")
    options = {k: re.sub(r"\\(.)", r"\1", v) for k, v in _JAAS_OPTION.findall(jaas)}
    missing = [k for k in ("username", "password") if k not in options]
    if missing:
        raise UsageError(f"{where}: sasl.jaas.config has no {' or '.join(missing)}")
    return {"sasl.username": options["username"], "sasl.password": options["password"]}


def _need_pem(props: Mapping[str, str], type_key: str, where: str) -> None:
    kind = props.get(type_key, "JKS").upper()
    if kind != "PEM":
        location = type_key.replace(".type", ".location")
        raise UsageError(f"{where}: {location} is a {kind} store, which librdkafka cannot read; give a PEM file "
                         f"with {type_key}=PEM" + (" (or ssl.ca.location)" if "truststore" in type_key else ""))


def java_client_properties(settings: Mapping[str, str]) -> dict[str, str]:
    """The other way, for a file kcompact writes for Kafka's tools: librdkafka settings of a SCRAM or
    certificate login as Java client properties (PEM stores, which Java's clients read since Kafka 2.7)."""
    out = {k: v for k, v in settings.items() if k in ("security.protocol", "sasl.mechanism", "ssl.key.password")}
    if "sasl.username" in settings:
        module = ("org.apache.kafka.common.security.plain.PlainLoginModule"
                  if settings.get("sasl.mechanism", "").upper() == "PLAIN"
                  else "org.apache.kafka.common.security.scram.ScramLoginModule")
        user, password = (settings[k].replace("\\", "\\\\").replace('"', '\\"') for k in ("sasl.username",
                                                                                         "sasl.password"))
        out["sasl.jaas.config"] = f'{module} required username="{user}" password="{password}";'
    if "ssl.ca.location" in settings:
        out.update({"ssl.truststore.type": "PEM", "ssl.truststore.location": settings["ssl.ca.location"]})
    return out
