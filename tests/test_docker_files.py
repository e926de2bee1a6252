"""What can be checked of the Docker files without a Docker engine."""

from __future__ import annotations

import json
import shlex
import tomllib
from pathlib import Path

import yaml

from streaming.cli.main import build_parser

ROOT = Path(__file__).resolve().parent.parent


def _dockerfile_instructions() -> list[tuple[str, str]]:
    lines = [ln.strip() for ln in (ROOT / "docker" / "Dockerfile").read_text().splitlines()]
    joined = " ".join(ln[:-1] if ln.endswith("\\") else ln + "\n" for ln in lines if ln and not ln.startswith("#"))
    return [tuple(part.strip().split(None, 1)) for part in joined.splitlines() if part.strip()]


def test_image_entry_point_is_the_console_command() -> None:
    instr = _dockerfile_instructions()
    entry = [json.loads(args) for op, args in instr if op == "ENTRYPOINT"]
    assert entry == [["kcompact"]]
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts == {"kcompact": "streaming.cli.main:main"}
    assert instr[0][0] == "FROM" and "python:3.11" in instr[0][1]


def test_image_copies_only_paths_that_exist() -> None:
    for op, args in _dockerfile_instructions():
        if op == "COPY":
            *sources, _dest = shlex.split(args)
            for src in sources:
                assert (ROOT / src).exists(), f"Dockerfile copies missing {src}"


def test_compose_services_run_valid_kcompact_commands() -> None:
    compose = yaml.safe_load((ROOT / "docker" / "compose.yaml").read_text())
    services = compose["services"]
    assert {"kafka", "compactor", "demo-producer"} <= services.keys()
    assert services["kafka"]["environment"]["KAFKA_PROCESS_ROLES"] == "broker,controller"
    for name in ("compactor", "demo-producer"):
        svc = services[name]
        assert svc["image"] == "kcompact:latest"
        args = build_parser().parse_args(svc["command"])
        assert args.bootstrap_servers == "kafka:9092"
    produced = build_parser().parse_args(services["demo-producer"]["command"]).topic
    assert build_parser().parse_args(services["compactor"]["command"]).source_topic == [produced]
    assert (ROOT / services["demo-producer"]["build"]["context"].replace("..", ".")
            / services["demo-producer"]["build"]["dockerfile"]).exists()
