"""The driver JVM's class archive (Class Data Sharing): the classes Spark loads at start, mapped from a file.

Most of a job's start is Spark's JVM loading and verifying the classes of its context, its session and the
streaming query (bench/README.md); a restart pays it again. A dynamic CDS archive of those classes, made once
per Spark installation and JDK in the user cache, lets every later JVM map them instead.

The archive is made from a running job: a JVM started while none exists records what it loads
(-XX:+RecordDynamicDumpInfo), and once the job's first micro-batch is done (its classes loaded), ``jcmd``
dumps them into a scratch directory that is then published whole (runtime.user_cache): a job killed meanwhile
leaves nothing that looks complete. The JVM itself checks an archive against its own build and class path
and starts without it (-Xshare:auto, its default) when they differ, so a stale archive costs only its
speed-up; the cache key (the JDK, the Spark home and its jars) keeps an upgrade from reusing one.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import subprocess
import threading
import time
from pathlib import Path

from pyspark import __version__ as pyspark_version

from streaming.runtime import user_cache

log = logging.getLogger(__name__)

ARCHIVE = "classes.jsa"
DUMP_TIMEOUT_S = 120.0
RECORD_CONF = "spark.kcompact.classArchive"  # set when the launch records: where its archive is to go
QUIET = "-Xlog:cds=off,cds+dynamic=off"  # the dump's notes on classes it skips go to the JVM's stdout otherwise


def _java() -> str | None:
    """The java Spark's launcher runs (JAVA_HOME's, else the one on PATH), resolved."""
    home = os.environ.get("JAVA_HOME")
    java = os.path.join(home, "bin", "java") if home else shutil.which("java")
    return os.path.realpath(java) if java and os.path.exists(java) else None


def archive_dir(spark_home: str, cache_root: Path | None = None) -> Path | None:
    """Where the archive of this JDK and Spark home lives; None without a java to name it by."""
    java = _java()
    if java is None:
        return None
    jars = os.path.join(spark_home, "jars")
    names = sorted(os.listdir(jars)) if os.path.isdir(jars) else []
    key = hashlib.sha1("\0".join([java, os.path.realpath(spark_home), pyspark_version, *names]).encode()).hexdigest()
    return (cache_root or user_cache.cache_root()) / f"spark-classes-{key[:12]}"


def _complete(directory: Path) -> bool:
    return (directory / ARCHIVE).is_file()


class ClassArchive:
    """The archive of one launch: the JVM options that use it or record for it, and the dump once warm."""

    def __init__(self, directory: Path | None) -> None:
        self.directory = directory
        self.present = directory is not None and _complete(directory)

    @classmethod
    def for_spark_home(cls, spark_home: str | None) -> ClassArchive:
        return cls(archive_dir(spark_home) if spark_home else None)

    @property
    def recording(self) -> bool:
        return self.directory is not None and not self.present

    def java_options(self) -> str:
        if self.directory is None:
            return ""
        if self.present:
            return f"-XX:SharedArchiveFile={self.directory / ARCHIVE} {QUIET}"
        return f"-XX:+RecordDynamicDumpInfo {QUIET}"

    def dump_from(self, jvm_pid: int | None) -> None:
        """Dump the running JVM's classes, in a thread of its own (the JVM pauses for it once), when the launch
        found no archive."""
        if not self.recording or jvm_pid is None:
            return
        threading.Thread(target=self._dump, args=(jvm_pid,), name="class-archive", daemon=True).start()

    def _dump(self, jvm_pid: int) -> None:
        java = _java()
        jcmd = os.path.join(os.path.dirname(java), "jcmd") if java else None
        if jcmd is None or not os.path.exists(jcmd):  # a JRE without the JDK's tools: no archive, only slower
            log.debug("no jcmd beside %s: Spark's classes are not archived", java)
            return
        for left in self.directory.parent.glob(f".{self.directory.name}-*"):  # of a job that ended mid-dump
            if time.time() - left.stat().st_mtime > DUMP_TIMEOUT_S:
                shutil.rmtree(left, ignore_errors=True)
        scratch = user_cache.scratch_beside(self.directory)
        try:
            done = subprocess.run([jcmd, str(jvm_pid), "VM.cds", "dynamic_dump", str(scratch / ARCHIVE)],
                                  capture_output=True, text=True, timeout=DUMP_TIMEOUT_S, check=False)
            if done.returncode != 0 or not _complete(scratch):
                log.debug("Spark's classes were not archived: %s", (done.stdout + done.stderr).strip()[-300:])
                shutil.rmtree(scratch, ignore_errors=True)
                return
            user_cache.publish(scratch, self.directory, _complete)
            log.debug("Spark's classes archived in %s for the next start", self.directory)
        except (OSError, subprocess.SubprocessError) as exc:
            log.debug("Spark's classes were not archived: %s", exc)
            shutil.rmtree(scratch, ignore_errors=True)
