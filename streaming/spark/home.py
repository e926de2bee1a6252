"""The SPARK_HOME the compactor launches Spark with: the installed PySpark, minus its zipped copy of itself.

Spark puts ``$SPARK_HOME/python/lib/pyspark.zip`` and py4j's zip in front of PYTHONPATH for every Python
process it starts. The pip-installed PySpark ships those zips, so every such process imports pyspark from
a zip, and Python's zipimport cannot keep compiled bytecode: it compiles pyspark's sources on every start,
about three times slower than importing the installed package (bench/README.md). Spark starts that runner afresh for every streaming query (every ``kcompact run
--once``), and starts its planning daemons and the task daemon once per session.

So, when the user has not chosen a Spark installation (SPARK_HOME unset) and the workers run this
interpreter (which has the same PySpark installed), Spark is launched from a directory that links every
entry of the PySpark package except ``python``: Spark finds its scripts and jars there as before, the zip
entries it puts on PYTHONPATH name files that do not exist, and Python imports the installed pyspark with
its cached bytecode.
"""

from __future__ import annotations

import hashlib
import logging
import os
import sys
from pathlib import Path

import pyspark

from streaming.runtime import user_cache

log = logging.getLogger(__name__)

ZIPPED_SOURCES = "python"  # the package entry that holds python/lib/pyspark.zip and py4j's zip


def pyspark_dir() -> str:
    return os.path.dirname(os.path.realpath(pyspark.__file__))


def _complete(home: str, source: str, entries: list[str]) -> bool:
    links = [os.path.join(home, e) for e in entries]
    return all(os.path.islink(link) and os.readlink(link) == os.path.join(source, e) for link, e in zip(links, entries, strict=True))


def home_without_zips(source: str | None = None, cache_root: str | None = None) -> str:
    """A directory of links to every entry of ``source`` (the PySpark package) but its zipped sources;
    made once per PySpark installation (its path, version and entries name it) and shared by the
    processes that use it."""
    source = source or pyspark_dir()
    entries = sorted(e for e in os.listdir(source) if e != ZIPPED_SOURCES)
    key = hashlib.sha1("\0".join([source, pyspark.__version__, *entries]).encode()).hexdigest()[:12]
    home = Path(cache_root or user_cache.cache_root()) / f"spark-home-{key}"
    if _complete(str(home), source, entries):
        return str(home)
    scratch = user_cache.scratch_beside(home)
    for e in entries:
        os.symlink(os.path.join(source, e), os.path.join(scratch, e))
    user_cache.publish(scratch, home, lambda d: _complete(str(d), source, entries))
    return str(home)


def choose_spark_home() -> str | None:
    """Set SPARK_HOME for the Spark this process launches, when the user left it to PySpark and the
    Python workers are this interpreter; returns the directory chosen, or None when nothing was changed."""
    if os.environ.get("SPARK_HOME") or os.environ.get("PYSPARK_PYTHON", sys.executable) != sys.executable:
        return None
    source = pyspark_dir()
    if not os.path.isdir(os.path.join(source, ZIPPED_SOURCES, "lib")):
        return None
    try:
        home = home_without_zips(source)
    except OSError as exc:  # no writable cache directory: Spark runs from its own home, only slower to start
        log.debug("Spark keeps its own SPARK_HOME: %s", exc)
        return None
    os.environ["SPARK_HOME"] = home
    return home
