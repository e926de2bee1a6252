"""The driver JVM's class archive: recorded by a launch that finds none, dumped by jcmd into a scratch
directory and published whole, then used by every later launch; a dump that fails leaves no archive."""

from __future__ import annotations

import os
import stat
import time

import pytest

from streaming.spark.class_archive import ARCHIVE, ClassArchive, archive_dir


def _executable(path, text: str) -> None:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


@pytest.fixture
def jdk(tmp_path, monkeypatch):
    """A JAVA_HOME whose jcmd writes the dump's file (its last argument) as the JVM would."""
    home = tmp_path / "jdk"
    (home / "bin").mkdir(parents=True)
    _executable(home / "bin" / "java", "#!/bin/sh\n")
    _executable(home / "bin" / "jcmd", '#!/bin/sh\nfor last; do :; done\nprintf archive > "$last"\n')
    monkeypatch.setenv("JAVA_HOME", str(home))
    return home


@pytest.fixture
def spark_home(tmp_path):
    home = tmp_path / "spark"
    (home / "jars").mkdir(parents=True)
    (home / "jars" / "spark-core.jar").write_bytes(b"")
    return home


def _dumped(archive: ClassArchive) -> None:
    archive.dump_from(os.getpid())
    deadline = time.monotonic() + 10
    while not (archive.directory / ARCHIVE).exists() and time.monotonic() < deadline:
        time.sleep(0.02)


def test_a_launch_without_an_archive_records_one_and_the_next_uses_it(jdk, spark_home, tmp_path) -> None:
    first = ClassArchive(archive_dir(str(spark_home), tmp_path / "cache"))
    assert first.recording and "-XX:+RecordDynamicDumpInfo" in first.java_options()
    _dumped(first)
    assert (first.directory / ARCHIVE).read_text() == "archive"
    assert not [p for p in first.directory.parent.iterdir() if p.name.startswith(".")], "no scratch left"
    second = ClassArchive(archive_dir(str(spark_home), tmp_path / "cache"))
    assert not second.recording
    assert f"-XX:SharedArchiveFile={second.directory / ARCHIVE}" in second.java_options()


def test_a_dump_that_fails_leaves_no_archive(jdk, spark_home, tmp_path) -> None:
    _executable(jdk / "bin" / "jcmd", "#!/bin/sh\necho 'Dynamic dump: not recorded'\n")
    archive = ClassArchive(archive_dir(str(spark_home), tmp_path / "cache"))
    archive._dump(os.getpid())  # the dump thread's work, run here to its end
    assert not archive.directory.exists()
    assert not list(archive.directory.parent.iterdir()), "its scratch is removed"
    assert ClassArchive(archive.directory).recording


def test_other_jars_or_no_java_name_no_archive_of_this_one(jdk, spark_home, tmp_path, monkeypatch) -> None:
    before = archive_dir(str(spark_home), tmp_path / "cache")
    (spark_home / "jars" / "spark-sql.jar").write_bytes(b"")
    assert archive_dir(str(spark_home), tmp_path / "cache") != before
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "nowhere"))
    assert archive_dir(str(spark_home), tmp_path / "cache") is None
    assert ClassArchive(None).java_options() == ""
