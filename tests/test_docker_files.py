"""What can be checked of the Docker files without a Docker engine (tests/brokers/test_images.py builds and
runs them)."""

from __future__ import annotations

import json
import re
import shlex
import tomllib
from pathlib import Path

import yaml

from streaming.brokers.images import KCOMPACT_IMAGE, kafka_image
from streaming.cli.main import build_parser

ROOT = Path(__file__).resolve().parent.parent


def _dockerfile_instructions(path: Path) -> list[tuple[str, str]]:
    lines = [ln.strip() for ln in path.read_text().splitlines()]
    joined = " ".join(ln[:-1] if ln.endswith("\\") else ln + "\n" for ln in lines if ln and not ln.startswith("#"))
    return [tuple(part.strip().split(None, 1)) for part in joined.splitlines() if part.strip()]


def test_image_entry_point_is_the_console_command_on_a_base_given_as_an_argument() -> None:
    instr = _dockerfile_instructions(ROOT / "docker" / "Dockerfile")
    entry = [json.loads(args) for op, args in instr if op == "ENTRYPOINT"]
    assert entry == [["kcompact"]]
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts == {"kcompact": "streaming.cli.main:main"}
    assert instr[0] == ("ARG", "BASE=python:3.11-slim-bookworm") and instr[1] == ("FROM", "${BASE}")


def test_images_copy_only_paths_that_exist() -> None:
    for dockerfile, context in ((ROOT / "docker" / "Dockerfile", ROOT), (ROOT / "docker" / "kafka" / "Dockerfile",
                                                                          ROOT / "docker" / "kafka")):
        for op, args in _dockerfile_instructions(dockerfile):
            if op == "COPY":
                *sources, _dest = shlex.split(args)
                for src in sources:
                    assert src == "jars/" or (context / src).exists(), f"{dockerfile} copies missing {src}"


def _with_defaults(text: str) -> str:
    """The compose file as compose reads it with no variable set: ${NAME:-default} is the default."""
    return re.sub(r"\$\{\w+:-([^}]*)\}", r"\1", text)


def test_compose_services_run_the_projects_images_and_valid_kcompact_commands() -> None:
    compose = yaml.safe_load(_with_defaults((ROOT / "docker" / "compose.yaml").read_text()))
    services = compose["services"]
    assert {"kafka", "compactor", "demo-producer"} <= services.keys()
    assert services["kafka"]["image"] == kafka_image()
    for name in ("compactor", "demo-producer"):
        svc = services[name]
        assert svc["image"] == KCOMPACT_IMAGE
        args = build_parser().parse_args(svc["command"])
        assert args.bootstrap_servers == "kafka:9092"
    produced = build_parser().parse_args(services["demo-producer"]["command"]).topic
    assert build_parser().parse_args(services["compactor"]["command"]).source_topic == [produced]
    published = [p for svc in services.values() for p in svc.get("ports", [])]
    assert published and all(p.startswith("127.0.0.1:") for p in published), "published on loopback only"
