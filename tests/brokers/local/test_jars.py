"""The local broker's jars: fetched once with Maven into the user cache, never half, and a clear error
when they are missing and cannot be fetched."""

from __future__ import annotations

import pytest

from streaming.brokers.local.jars import KafkaJarsError, ensure_kafka_jars, jars_dir, pinned_version


def test_the_pom_pins_an_apache_kafka_4_version() -> None:
    major = pinned_version().split(".")[0]
    assert major == "4"


def test_fetched_once_then_served_from_the_cache(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    jars = ensure_kafka_jars(root=tmp_path)
    assert jars.directory == jars_dir(root=tmp_path)
    names = {p.name for p in jars.directory.iterdir()}
    assert f"kafka_2.13-{jars.version}.jar" in names and any(n.startswith("kafka-clients-") for n in names)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")], "no scratch directory left behind"
    monkeypatch.setenv("PATH", str(tmp_path / "no-bin"))  # no mvn: only the cache can answer
    assert ensure_kafka_jars(root=tmp_path) == jars


def test_missing_jars_without_maven_name_the_remedy(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "no-bin"))
    with pytest.raises(KafkaJarsError, match=r"Maven \(mvn\) is missing.*scripts/bootstrap.sh"):
        ensure_kafka_jars(root=tmp_path)
    assert not list(tmp_path.iterdir())
