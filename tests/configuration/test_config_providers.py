"""Kafka's config-provider references resolve to what they name, and one that cannot is one line naming the
setting and the reference, never a value."""

from __future__ import annotations

import pytest

from streaming.configuration.config_providers import UnresolvedReference, referenced, resolve_all


def test_file_env_and_dir_references_resolve_and_plain_values_stay(tmp_path, monkeypatch) -> None:
    (tmp_path / "secrets.properties").write_text("sasl.password=s3cr:et\\=x\nother=1\n")
    (tmp_path / "mounted").mkdir()
    (tmp_path / "mounted" / "password").write_text("from-a-dir\n")
    monkeypatch.setenv("KC_TEST_SECRET", "from-env")
    settings = {"sasl.password": f"${{file:{tmp_path}/secrets.properties:sasl.password}}",
                "ssl.key.password": "${env:KC_TEST_SECRET}",
                "sasl.oauthbearer.client.secret": f"${{dir:{tmp_path}/mounted:password}}",
                "sasl.username": "plain", "sasl.jaas.config": "prefix-${env:KC_TEST_SECRET}-suffix"}
    assert resolve_all(settings) == {"sasl.password": "s3cr:et=x", "ssl.key.password": "from-env",
                                     "sasl.oauthbearer.client.secret": "from-a-dir", "sasl.username": "plain",
                                     "sasl.jaas.config": "prefix-from-env-suffix"}
    assert referenced(settings) == {"sasl.password", "ssl.key.password", "sasl.oauthbearer.client.secret",
                                    "sasl.jaas.config"}


@pytest.mark.parametrize("reference, said", [
    ("${file:/nonexistent/secrets.properties:sasl.password}", "cannot read /nonexistent/secrets.properties"),
    ("${file:{dir}/secrets.properties:nope}", "has no key 'nope'"),
    ("${env:KC_TEST_UNSET_VARIABLE}", "the environment variable KC_TEST_UNSET_VARIABLE is not set"),
    ("${vault:secret/kafka:password}", "unknown config provider 'vault'"),
    ("${file:sasl.password}", "needs a path and a key"),
])
def test_a_reference_that_cannot_be_resolved_names_the_setting_and_why(tmp_path, reference: str, said: str) -> None:
    (tmp_path / "secrets.properties").write_text("sasl.password=hidden-value\n")
    reference = reference.replace("{dir}", str(tmp_path))
    with pytest.raises(UnresolvedReference) as caught:
        resolve_all({"sasl.password": reference})
    assert said in str(caught.value) and "sasl.password" in str(caught.value)
    assert "hidden-value" not in str(caught.value)
