"""Apache Kafka's jars for the local broker, fetched once with Maven from the pom shipped beside this module
(or from another pom of Kafka's artifacts: the benchmark's MirrorMaker 2).

They live in the user cache, outside the repository, named after the pinned version and the pom's digest,
so changing the pin fetches anew and never mixes two versions. A fetch is complete when the pom's first
dependency, the artifact it is for, is there.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

from streaming.runtime import user_cache

POM = Path(__file__).with_name("pom.xml")
_POM_NS = {"m": "http://maven.apache.org/POM/4.0.0"}


class KafkaJarsError(RuntimeError):
    """The jars are missing and could not be fetched; the message says what to do."""


@dataclass(frozen=True)
class KafkaJars:
    version: str
    directory: Path

    @property
    def classpath(self) -> str:
        return str(self.directory / "*")


def pinned_version(pom: Path = POM) -> str:
    version = ET.parse(pom).getroot().find("m:properties/m:kafka.version", _POM_NS)
    if version is None or not (version.text or "").strip():
        raise KafkaJarsError(f"{pom} does not pin kafka.version")
    return version.text.strip()


def _main_artifact(pom: Path) -> str:
    artifact = ET.parse(pom).getroot().find("m:dependencies/m:dependency/m:artifactId", _POM_NS)
    if artifact is None or not (artifact.text or "").strip():
        raise KafkaJarsError(f"{pom} has no dependency")
    return artifact.text.strip()


def jars_dir(pom: Path = POM, root: Path | None = None) -> Path:
    digest = hashlib.sha256(pom.read_bytes()).hexdigest()[:12]
    main = _main_artifact(pom)
    name = "kafka" if main == _main_artifact(POM) else main  # the broker's keeps its name: caches stay valid
    return (root or user_cache.cache_root()) / f"{name}-{pinned_version(pom)}-{digest}"


def _complete(directory: Path, pom: Path) -> bool:
    return (directory / f"{_main_artifact(pom)}-{pinned_version(pom)}.jar").is_file()


def ensure_kafka_jars(pom: Path = POM, root: Path | None = None) -> KafkaJars:
    """The cached jars, fetched first when missing (needs ``mvn`` and Maven Central)."""
    version = pinned_version(pom)
    target = jars_dir(pom, root)
    with user_cache.filling(target):
        if not _complete(target, pom):
            _fetch(pom, version, target)
    return KafkaJars(version, target)


def _fetch(pom: Path, version: str, target: Path) -> None:
    mvn = shutil.which("mvn")
    if mvn is None:
        raise KafkaJarsError(f"Apache Kafka {version} is not fetched yet and Maven (mvn) is missing: run "
                             f"scripts/bootstrap.sh, or install maven, or set KAFKA_BOOTSTRAP_SERVERS")
    scratch = user_cache.scratch_beside(target)
    done = subprocess.run([mvn, "-q", "-B", "-f", str(pom), "dependency:copy-dependencies",
                           f"-DoutputDirectory={scratch}", "-DincludeScope=runtime"],
                          capture_output=True, text=True)
    if done.returncode != 0 or not _complete(scratch, pom):
        shutil.rmtree(scratch, ignore_errors=True)
        tail = (done.stdout + done.stderr).strip().splitlines()[-5:]
        raise KafkaJarsError(f"Maven could not fetch Apache Kafka {version} ({pom}): " + " | ".join(tail))
    user_cache.publish(scratch, target, lambda d: _complete(d, pom))
