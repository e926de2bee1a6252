"""What can be checked of the Docker files without a Docker engine (tests/brokers/test_images.py builds and
runs them)."""

from __future__ import annotations

import json
import re
import shlex
import tomllib
from pathlib import Path

import yaml
from prometheus_client import generate_latest
from prometheus_client.registry import CollectorRegistry

from streaming.brokers.images import KCOMPACT_IMAGE, kafka_image
from streaming.cleaner import CleanerMetrics
from streaming.cli.main import build_parser
from streaming.job.compact import StageReport
from streaming.job.metrics import EraseLatency, JobCounters, JobMetricsCollector, MetricsDocument
from streaming.partition_id import PartitionId

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


def _exported_names() -> set[str]:
    """Every sample name the metrics endpoint serves, from the job's own collector fed a document of a
    partition with every figure set."""
    pid = PartitionId("t", 0)
    latency = EraseLatency()
    latency.observe("log", [1500])
    doc = MetricsDocument.of(1, CleanerMetrics(), JobCounters(), [StageReport(pid, emitted_up_to=3)], {pid: 9},
                             None, latency)
    collector = JobMetricsCollector()
    collector.update(doc)
    registry = CollectorRegistry()
    registry.register(collector)
    text = generate_latest(registry).decode()
    return {line.split("{")[0].split(" ")[0] for line in text.splitlines() if line and not line.startswith("#")}


def test_every_metric_the_dashboard_queries_is_one_the_endpoint_exports() -> None:
    dashboard = json.loads((ROOT / "docker" / "monitoring" / "grafana" / "dashboards" / "kcompact.json").read_text())
    queried = {name for panel in dashboard["panels"] for target in panel["targets"]
               for name in re.findall(r"\bkcompact_\w+", target["expr"])}
    exported = _exported_names()
    assert {"kcompact_erase_latency_seconds_bucket", "kcompact_partition_erasures_overdue"} <= queried
    assert queried <= exported, sorted(queried - exported)


def test_the_monitoring_profile_loads_the_dashboard_and_scrapes_the_compactor() -> None:
    compose = yaml.safe_load(_with_defaults((ROOT / "docker" / "compose.yaml").read_text()))
    services = compose["services"]
    for name in ("prometheus", "grafana"):
        assert services[name]["profiles"] == ["monitoring"]
        for volume in services[name]["volumes"]:
            assert (ROOT / "docker" / volume.split(":")[0]).exists(), volume
    scrape = yaml.safe_load((ROOT / "docker" / "monitoring" / "prometheus.yml").read_text())
    [target] = scrape["scrape_configs"][0]["static_configs"][0]["targets"]
    assert target == "compactor:9464" and "--metrics-port" in services["compactor"]["command"]
