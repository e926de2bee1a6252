"""The project's images, built here with or without a registry: Apache Kafka from the Maven-pinned jars, and
the compactor. ``bash scripts/build_images.sh`` builds both; the test session builds what its tests need.

Each image is labelled with a digest of what it is made of (its Dockerfile and files, the pom or the
package's sources, the base), and a build whose digest matches the image already there does nothing. The
base is a public image where a registry answers (--base-from-registry), else a Debian bookworm made here
with mmdebstrap from the Debian mirror apt uses (Java 17, and python3, which is 3.11 on bookworm, so one base
serves both images); its tarball is kept in the user cache, so a new engine imports it in seconds instead of
building it again.
"""

from __future__ import annotations

import argparse
import errno
import hashlib
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Iterable

from streaming.runtime import user_cache
from streaming.brokers.engine import EngineMissing, client
from streaming.brokers.images import CONTENT_LABEL, KCOMPACT_IMAGE, content_of, kafka_image
from streaming.brokers.local.jars import POM, ensure_kafka_jars

log = logging.getLogger(__name__)

ROOT = Path(__file__).resolve().parents[1]
DOCKER_DIR = ROOT / "docker"
BASE_REPOSITORY = "kcompact/base"
DEBIAN_SUITE = "bookworm"
BASE_PACKAGES = ("openjdk-17-jre-headless", "python3", "python3-venv", "procps")
PUBLIC_BASES = {"kafka": "eclipse-temurin:17-jre", "kcompact": "python:3.11-slim-bookworm"}
APT_SOURCES = (Path("/etc/apt/sources.list.d/debian.sources"), Path("/etc/apt/sources.list"))


class ImageError(RuntimeError):
    """An image could not be built; the message says which and why."""


def _digest(parts: Iterable[bytes | str]) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(part.encode() if isinstance(part, str) else part)
        h.update(b"\0")
    return h.hexdigest()[:16]


def _files(paths: Iterable[Path]) -> list[bytes]:
    return [p.relative_to(ROOT).as_posix().encode() + b"\0" + p.read_bytes() for p in sorted(paths)]


def _build(engine: Any, context: Path, dockerfile: str, name: str, digest: str, args: dict[str, str]) -> str:
    import docker.errors  # noqa: PLC0415

    if content_of(engine, name) == digest:
        log.info("image %s is up to date (%s)", name, digest)
        return name
    log.info("building image %s from %s", name, context)
    try:
        engine.images.build(path=str(context), dockerfile=dockerfile, tag=name, buildargs=args, rm=True,
                            forcerm=True, labels={CONTENT_LABEL: digest})
    except docker.errors.BuildError as exc:
        tail = "".join(str(c.get("stream", c.get("error", ""))) for c in exc.build_log)[-2000:]
        raise ImageError(f"building {name} failed: {exc.msg}\n{tail}") from None
    return name


# ----- the base ---------------------------------------------------------------------------------------------

def debian_mirror() -> str:
    """The Debian mirror apt is configured with (the first one naming the bookworm suite)."""
    for path in APT_SOURCES:
        if not path.exists():
            continue
        text = path.read_text()
        deb822 = re.search(r"^URIs:\s*(\S+)\s*\nSuites:[^\n]*\bbookworm\b", text, re.M)
        if deb822:
            return deb822[1]
        line = re.search(r"^deb\s+(?:\[[^]]*\]\s+)?(\S+)\s+bookworm\b", text, re.M)
        if line:
            return line[1]
    return "http://deb.debian.org/debian"


def local_base(engine: Any) -> str:
    """A Debian bookworm with Java 17 and Python 3.11, made with mmdebstrap (root only), kept in the user
    cache as a tarball and imported into the engine when missing."""
    mirror = debian_mirror()
    digest = _digest([DEBIAN_SUITE, mirror, *BASE_PACKAGES])
    name = f"{BASE_REPOSITORY}:{DEBIAN_SUITE}-{digest}"
    if content_of(engine, name) is not None:
        return name
    tarball = user_cache.cache_root() / f"base-{DEBIAN_SUITE}-{digest}.tar"
    if not tarball.exists():
        _mmdebstrap(tarball, mirror)
    log.info("importing %s as %s", tarball, name)
    repository, tag = name.split(":")
    with open(tarball, "rb") as f:  # a file object is streamed; a path would be taken for a URL
        imported = engine.api.import_image(src=f, repository=repository, tag=tag,
                                           changes=[f"LABEL {CONTENT_LABEL}={digest}"])
    if "error" in str(imported).lower():
        raise ImageError(f"importing the base image from {tarball} failed: {imported}")
    return name


def _mmdebstrap(tarball: Path, mirror: str) -> None:
    if shutil.which("mmdebstrap") is None:
        raise ImageError("no registry base was asked for and mmdebstrap is missing: install it (apt-get install "
                         "mmdebstrap, as root) or build with --base-from-registry")
    if os.geteuid() != 0:
        raise ImageError("making the Debian base with mmdebstrap needs root; or build with --base-from-registry")
    tarball.parent.mkdir(parents=True, exist_ok=True)
    scratch = tarball.with_name(f".{os.getpid()}-{tarball.name}")  # mmdebstrap writes a tarball to *.tar
    log.info("making a Debian %s base with mmdebstrap from %s (about a minute)", DEBIAN_SUITE, mirror)
    done = subprocess.run(["mmdebstrap", "--variant=minbase", f"--include={','.join(BASE_PACKAGES)}",
                           "--aptopt=APT::Install-Recommends \"false\"",
                           "--essential-hook=mkdir -p \"$1/usr/share/man/man1\"",  # or Java's postinst fails
                           DEBIAN_SUITE, str(scratch), mirror], capture_output=True, text=True)
    if done.returncode != 0:
        scratch.unlink(missing_ok=True)
        raise ImageError(f"mmdebstrap failed: {(done.stdout + done.stderr).strip()[-1500:]}")
    scratch.rename(tarball)


def _base(engine: Any, image: str, from_registry: bool) -> str:
    return PUBLIC_BASES[image] if from_registry else local_base(engine)


# ----- the images -------------------------------------------------------------------------------------------

def build_kafka(engine: Any, from_registry: bool = False) -> str:
    """Apache Kafka of the pinned version; the context is docker/kafka/ and the jars, assembled in a
    scratch directory."""
    jars = ensure_kafka_jars()
    base = _base(engine, "kafka", from_registry)
    recipe = sorted((DOCKER_DIR / "kafka").iterdir())
    digest = _digest([base, *_files([*recipe, POM])])
    with tempfile.TemporaryDirectory(prefix="kcompact-kafka-image-") as context:
        for f in recipe:
            shutil.copy(f, context)
        shutil.copytree(jars.directory, Path(context) / "jars", copy_function=_linked_or_copied)
        return _build(engine, Path(context), "Dockerfile", kafka_image(), digest, {"BASE": base})


def _linked_or_copied(source: str, target: str) -> None:
    """A hard link where the scratch directory shares the cache's filesystem and links are allowed, else a
    copy: TMPDIR may be elsewhere (the test command keeps it in memory, in /dev/shm)."""
    try:
        os.link(source, target)
    except OSError as exc:
        if exc.errno not in (errno.EXDEV, errno.EPERM):  # another filesystem; protected hard links
            raise
        shutil.copy2(source, target)


def build_kcompact(engine: Any, from_registry: bool = False) -> str:
    """The compactor from this checkout; without a registry, from wheels of the pip cache (no index)."""
    base = _base(engine, "kcompact", from_registry)
    sources = [p for p in (ROOT / "streaming").rglob("*")
               if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".so"]  # not the in-place build
    digest = _digest([base, *_files([DOCKER_DIR / "Dockerfile", ROOT / "pyproject.toml", ROOT / "setup.py",
                                     ROOT / "README.md", *sources])])
    if content_of(engine, KCOMPACT_IMAGE) == digest:
        return KCOMPACT_IMAGE
    args = {"BASE": base}
    _wheelhouse(DOCKER_DIR / "wheelhouse", with_dependencies=not from_registry)
    if not from_registry:
        args["PIP_NO_INDEX"] = "1"
    return _build(engine, ROOT, "docker/Dockerfile", KCOMPACT_IMAGE, digest, args)


def _wheelhouse(directory: Path, with_dependencies: bool) -> None:
    """The package's wheel, built here with its C extension; with its dependencies, wheels of the extra the
    image installs (table) and everything they need, built from the pip cache where it has them."""
    for old in directory.glob("*.whl"):
        old.unlink()
    wanted = [f"{ROOT}[table]", "setuptools>=68", "wheel"] if with_dependencies else ["--no-deps", str(ROOT)]
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--wheel-dir", str(directory), *wanted],
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise ImageError(f"building the wheels for the compactor image failed: {done.stderr.strip()[-1500:]}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="build_images", description=__doc__.split("\n\n")[0])
    parser.add_argument("--base-from-registry", action="store_true",
                        help=f"build on public images ({', '.join(PUBLIC_BASES.values())}) instead of a Debian "
                             f"base made here with mmdebstrap")
    parser.add_argument("--only", choices=["kafka", "kcompact"], help="build one image (default: both)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    if not (DOCKER_DIR / "kafka" / "Dockerfile").exists():
        print(f"kcompact: error: the images are built from a checkout of kcompact ({DOCKER_DIR} is missing)",
              file=sys.stderr)
        return 2
    try:
        engine = client(30)
        for image, build in (("kafka", build_kafka), ("kcompact", build_kcompact)):
            if args.only in (None, image):
                print(build(engine, args.base_from_registry))
    except (EngineMissing, ImageError) as exc:
        print(f"kcompact: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
