"""Spark is launched from a home without PySpark's zipped sources, so its Python processes import the
installed pyspark with cached bytecode instead of compiling it from a zip at every start."""

from __future__ import annotations

import os
import sys

import pytest

from streaming.runtime import user_cache
from streaming.spark.home import choose_spark_home, home_without_zips


@pytest.fixture
def fake_pyspark(tmp_path):
    package = tmp_path / "pyspark"
    for d in ("bin", "jars", "python/lib", "sql"):
        (package / d).mkdir(parents=True)
    (package / "python/lib/pyspark.zip").write_bytes(b"")
    (package / "__init__.py").write_text("")
    return str(package)


def test_home_links_every_entry_of_the_package_but_its_zipped_sources(fake_pyspark, tmp_path) -> None:
    home = home_without_zips(fake_pyspark, str(tmp_path / "cache"))
    assert sorted(os.listdir(home)) == ["__init__.py", "bin", "jars", "sql"]
    assert os.path.realpath(os.path.join(home, "jars")) == os.path.join(fake_pyspark, "jars")
    assert not os.path.exists(os.path.join(home, "python", "lib", "pyspark.zip"))


def test_home_is_made_once_and_an_incomplete_one_is_made_again(fake_pyspark, tmp_path) -> None:
    cache = str(tmp_path / "cache")
    home = home_without_zips(fake_pyspark, cache)
    marker = os.stat(home).st_ino
    assert home_without_zips(fake_pyspark, cache) == home
    assert os.stat(home).st_ino == marker
    os.unlink(os.path.join(home, "jars"))  # a home left half made
    assert home_without_zips(fake_pyspark, cache) == home
    assert os.path.islink(os.path.join(home, "jars"))
    assert [e for e in os.listdir(cache) if e.startswith(".spark-home-")] == []


def test_a_spark_home_the_user_chose_is_kept(monkeypatch) -> None:
    monkeypatch.setenv("SPARK_HOME", "/opt/spark")
    assert choose_spark_home() is None
    assert os.environ["SPARK_HOME"] == "/opt/spark"


def test_workers_on_another_interpreter_keep_sparks_own_home(monkeypatch) -> None:
    """Another interpreter may not have pyspark installed: it needs the zips."""
    monkeypatch.delenv("SPARK_HOME", raising=False)
    monkeypatch.setenv("PYSPARK_PYTHON", "/usr/bin/python3-elsewhere")
    assert choose_spark_home() is None
    assert "SPARK_HOME" not in os.environ


def test_without_a_writable_cache_spark_keeps_its_own_home(monkeypatch, tmp_path) -> None:
    monkeypatch.delenv("SPARK_HOME", raising=False)
    monkeypatch.setenv("PYSPARK_PYTHON", sys.executable)
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    monkeypatch.setattr(user_cache, "cache_root", lambda: blocker / "kcompact")
    assert choose_spark_home() is None
    assert "SPARK_HOME" not in os.environ


def _pyspark_origin(_):
    import pyspark
    return pyspark.__file__, os.environ.get("SPARK_HOME")


def test_spark_python_processes_import_the_installed_pyspark(spark) -> None:
    for origin, home in spark.sparkContext.parallelize(range(2), 2).map(_pyspark_origin).collect():
        assert ".zip" not in origin, origin
        assert not os.path.exists(os.path.join(home, "python", "lib", "pyspark.zip"))
