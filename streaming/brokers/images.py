"""The project's images as the package knows them: their names, and whether one is built (the label its
build left). `kcompact broker` and the demo use the Kafka image when the engine has it; building the images is
scripts/build_images.py's (bash scripts/build_images.sh), from a checkout.
"""

from __future__ import annotations

from typing import Any

from streaming.brokers.local.jars import pinned_version

CONTENT_LABEL = "io.kcompact.content"  # the digest of what an image was built from
KAFKA_REPOSITORY = "kcompact/kafka"
KCOMPACT_IMAGE = "kcompact:latest"


def kafka_image() -> str:
    return f"{KAFKA_REPOSITORY}:{pinned_version()}"


def content_of(engine: Any, name: str) -> str | None:
    """The digest an image of that name was built from, or None when there is no such image."""
    import docker.errors  # noqa: PLC0415

    try:
        return engine.images.get(name).labels.get(CONTENT_LABEL)
    except docker.errors.ImageNotFound:
        return None
