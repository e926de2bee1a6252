"""A Kafka tool's client properties (kafka-acls.sh --command-config) read as librdkafka settings, and the
file kcompact writes for Kafka's tools read back the same."""

from __future__ import annotations

import pytest

from streaming.configuration import java_properties
from streaming.configuration.client_properties import (java_client_properties, librdkafka_settings,
                                                       read_client_properties)
from streaming.errors import UsageError

SCRAM = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="ops" password="p\\"w;x";'


def test_a_java_scram_login_and_pem_truststore_become_librdkafka_settings() -> None:
    got = librdkafka_settings({"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
                               "sasl.jaas.config": SCRAM, "ssl.truststore.type": "PEM",
                               "ssl.truststore.location": "/etc/ca.pem", "client.id": "ops"}, "--admin-config f")
    assert got == {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "ops",
                   "sasl.password": 'p"w;x', "ssl.ca.location": "/etc/ca.pem", "client.id": "ops"}


def test_librdkafka_keys_and_a_pem_or_pkcs12_keystore_pass() -> None:
    assert librdkafka_settings({"ssl.keystore.type": "PEM", "ssl.keystore.location": "/k.pem"}, "f") == \
        {"ssl.certificate.location": "/k.pem", "ssl.key.location": "/k.pem"}
    pkcs12 = {"ssl.keystore.type": "PKCS12", "ssl.keystore.location": "/k.p12", "ssl.keystore.password": "x"}
    assert librdkafka_settings(pkcs12, "f") == {"ssl.keystore.location": "/k.p12", "ssl.keystore.password": "x"}
    assert librdkafka_settings({"sasl.username": "a", "ssl.ca.location": "/ca"}, "f") == \
        {"sasl.username": "a", "ssl.ca.location": "/ca"}


@pytest.mark.parametrize("props,says", [
    ({"ssl.truststore.location": "/t.jks"}, "ssl.truststore.location is a JKS store, which librdkafka cannot read"),
    ({"ssl.keystore.location": "/k.jks", "ssl.keystore.type": "JKS"}, "ssl.keystore.location is a JKS store"),
    ({"sasl.jaas.config": "com.sun.security.auth.module.Krb5LoginModule required;"}, "uses com.sun.security"),
    ({"sasl.jaas.config": "org.apache.kafka.common.security.plain.PlainLoginModule required username=\"a\";"},
     "sasl.jaas.config has no password"),
])
def test_what_librdkafka_cannot_read_is_one_line_naming_the_file(props: dict, says: str) -> None:
    with pytest.raises(UsageError, match="^--admin-config ops.properties: .*" + says.replace(".", r"\.")):
        librdkafka_settings(props, "--admin-config ops.properties")


def test_a_file_kcompact_writes_for_kafkas_tools_reads_back_as_the_settings_it_came_from(tmp_path) -> None:
    settings = {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "admin",
                "sasl.password": 'a "quoted" \\ secret', "ssl.ca.location": "/ca.pem"}
    path = tmp_path / "admin.properties"
    path.write_text(java_properties.dumps(java_client_properties(settings)))
    assert read_client_properties(str(path), "--admin-config") == settings
    with pytest.raises(UsageError, match="^--admin-config /no/such: No such file"):
        read_client_properties("/no/such", "--admin-config")
