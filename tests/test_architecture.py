"""The house rules of the package, checked on its import graph (scripts/import_graph.py draws it)."""

from __future__ import annotations

import ast
import importlib.util
import re
from pathlib import Path

import pytest

_spec = importlib.util.spec_from_file_location(
    "import_graph", Path(__file__).resolve().parent.parent / "scripts" / "import_graph.py")
import_graph = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(import_graph)

IMPORTS = import_graph.imports()
ROOT = Path(__file__).resolve().parent.parent


def _importers(library: str) -> set[str]:
    return {m for m, found in IMPORTS.items() if any(i == library or i.startswith(library + ".") for i in found)}


@pytest.mark.parametrize("by_package", [True, False], ids=["packages", "modules"])
def test_imports_have_no_cycle(by_package: bool) -> None:
    assert import_graph.cycles(import_graph.graph(by_package)) == []


@pytest.mark.parametrize("library", ["pyspark", "py4j"])
def test_spark_and_its_bridge_are_imported_only_by_the_spark_package(library: str) -> None:
    assert _importers(library) and all(m.startswith("streaming.spark.") for m in _importers(library))


SPARK_KAFKA_SOURCE = {"streaming.spark.source.kafka_source", "streaming.spark.source.range_read",
                      "streaming.spark.source.columns"}  # the source's planning, its task's read, its Arrow columns


def test_confluent_kafka_is_imported_only_by_the_kafka_package_and_the_spark_source() -> None:
    owners = _importers("confluent_kafka")
    assert owners and all(m.startswith("streaming.kafka.") or m in SPARK_KAFKA_SOURCE for m in owners), owners


def test_docker_and_testcontainers_are_imported_only_by_the_brokers_package() -> None:
    owners = _importers("docker") | _importers("testcontainers")
    assert owners and all(m.startswith("streaming.brokers.") for m in owners), owners


def test_pyiceberg_is_imported_only_by_the_iceberg_package() -> None:
    owners = _importers("pyiceberg")
    assert owners and all(m.startswith("streaming.iceberg.") for m in owners), owners


def test_certificates_and_properties_files_have_one_owner_each() -> None:
    assert _importers("cryptography") == {"streaming.security.certificates"}
    assert _importers("javaproperties") == {"streaming.configuration.java_properties"}


def test_each_object_store_client_is_imported_by_its_own_module_only() -> None:
    assert _importers("boto3") == {"streaming.state.s3"} and _importers("botocore") == {"streaming.state.s3"}
    assert _importers("google") == {"streaming.state.gcs"}


def test_the_core_imports_neither_spark_nor_kafka_nor_the_edges() -> None:
    edges = ("pyspark", "py4j", "confluent_kafka", "streaming.job", "streaming.kafka", "streaming.spark",
             "streaming.cli", "streaming.state")
    for module, found in IMPORTS.items():
        if module.startswith(("streaming.log", "streaming.cleaner", "streaming.erasure")):
            assert not [i for i in found if i.startswith(edges)], module


def test_only_the_state_package_names_files_of_the_state_dir() -> None:
    names = ("kcompact.json", "metrics.json", "emitted.json", ".writer.lock", ".lock", "checkpoint")
    for path in import_graph.PACKAGE.rglob("*.py"):
        if path.parent.name != "state":
            assert not [n for n in names if f'"{n}"' in path.read_text()], path


SPARK_ATTRIBUTES = ("readStream", "writeStream", "parallelize", "mapInArrow", "foreachBatch", "sparkContext",
                    "statusTracker", "createDataFrame")


def test_only_the_spark_package_touches_spark_objects() -> None:
    """job/ drives Spark through streaming.job.engine's types; Spark's own calls live in spark/ alone."""
    import ast

    for path in import_graph.PACKAGE.rglob("*.py"):
        if "spark" in path.relative_to(import_graph.PACKAGE).parts[:1]:
            continue
        used = {node.attr for node in ast.walk(ast.parse(path.read_text())) if isinstance(node, ast.Attribute)}
        assert not used & set(SPARK_ATTRIBUTES), (path, sorted(used & set(SPARK_ATTRIBUTES)))


def test_no_api_of_the_package_exists_for_tests() -> None:
    """The package holds what users run: a class or function whose docstring or comment says it is there for
    tests belongs in tests/."""
    said = []
    for path in sorted((ROOT / "streaming").rglob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                doc = ast.get_docstring(node) or ""
                if re.search(r"\b(for|by) (the )?tests\b", doc, re.I):
                    said.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name}")
        said += [f"{path.relative_to(ROOT)}:{n} (comment)" for n, line in enumerate(path.read_text().splitlines(), 1)
                 if "#" in line and re.search(r"\b(read|used|kept) (for|by) (the )?tests\b", line.split("#", 1)[1])]
    assert not said, said


def test_the_package_neither_builds_images_nor_removes_containers() -> None:
    """Building the images is scripts/build_images.py's and clearing a test run's containers the test
    session's; the package only asks whether an image is built and starts a broker container it stops itself."""
    calls = re.compile(r"\.images\.build\(|import_image\(|\.remove\(force=|mmdebstrap|\.networks\.|\.volumes\.")
    found = [f"{p.relative_to(ROOT)}:{n}" for p in sorted((ROOT / "streaming").rglob("*.py"))
             for n, line in enumerate(p.read_text().splitlines(), 1) if calls.search(line)]
    assert not found, found


def test_no_module_of_the_package_is_over_400_lines() -> None:
    """A module that long holds more than one concept; split it by what it holds."""
    long = {str(p.relative_to(ROOT)): n for p in (ROOT / "streaming").rglob("*.py")
            if (n := len(p.read_text().splitlines())) > 400}
    assert not long, long


def test_the_job_is_given_a_spec_and_its_options_not_a_list_of_arguments() -> None:
    import inspect

    from streaming.job.runner import CompactorJob

    assert len(inspect.signature(CompactorJob).parameters) <= 5


def test_no_module_beside_the_application_file_shadows_the_standard_library() -> None:
    """spark-submit runs streaming/cli/submit.py as a script, which puts streaming/cli/ first on sys.path: a
    module there named like a standard one (inspect, json) would be imported in its place."""
    import sys

    beside = {p.stem for p in (ROOT / "streaming" / "cli").glob("*.py")}
    assert not beside & set(sys.stdlib_module_names)


def test_the_package_top_level_holds_at_most_six_loose_modules() -> None:
    """Modules live in packages named for their concern; only the few every package shares stay loose."""
    loose = sorted(p.name for p in (ROOT / "streaming").glob("*.py") if p.name not in ("__init__.py", "__main__.py"))
    assert len(loose) <= 6, loose


KAFKA_ROOMS = ("native", "headers", "shared", "source", "sink", "groups", "access")  # lowest first
KAFKA = ROOT / "streaming" / "kafka"


def _kafka_room(module: str) -> str | None:
    """streaming.kafka.sink.sink_state -> sink; streaming.kafka.admin -> shared; outside the Kafka edge: None."""
    parts = module.split(".")
    if parts[:2] != ["streaming", "kafka"] or len(parts) < 3:
        return None
    return parts[2] if (KAFKA / parts[2]).is_dir() else "shared"


def test_each_room_of_the_kafka_edge_imports_only_the_rooms_below_it() -> None:
    """The native path at the bottom, then what every client shares, then the source's reads, which the sink's
    progress read uses; groups and access above the sink and the source."""
    upward = sorted(f"{m} -> {i}" for m, found in IMPORTS.items() if (r := _kafka_room(m)) is not None
                    for i in found if (ri := _kafka_room(i)) is not None
                    and KAFKA_ROOMS.index(ri) > KAFKA_ROOMS.index(r))
    assert {_kafka_room(m) for m in IMPORTS} - {None} == set(KAFKA_ROOMS)
    assert not upward, upward


def test_no_file_of_the_kafka_edge_sits_beside_more_than_twelve_others() -> None:
    """A newcomer finds a Kafka part from the tree: each folder a role, none a flat room of dozens."""
    def entries(folder: Path) -> list[str]:  # the extension's build is no entry of the tree
        return [p.name for p in folder.iterdir() if p.name != "__pycache__" and p.suffix != ".so"]

    crowded = {str(d.relative_to(ROOT)): len(entries(d)) for d in [KAFKA, *KAFKA.iterdir()]
               if d.is_dir() and d.name != "__pycache__" and len(entries(d)) > 13}
    assert not crowded, crowded


def test_only_the_commands_take_an_argparse_namespace() -> None:
    """Below cli/ every start and report takes typed values (RunOptions, Launch), never what argparse made."""
    parsers = sorted(m for m in _importers("argparse") if not m.startswith("streaming.cli."))
    typed = [f"{path.relative_to(ROOT)}:{node.lineno}" for path in sorted((ROOT / "streaming").rglob("*.py"))
             if path.parent.name != "cli" for node in ast.walk(ast.parse(path.read_text()))
             if isinstance(node, ast.arg) and node.annotation is not None
             and "Namespace" in ast.unparse(node.annotation)]
    assert not parsers and not typed, (parsers, typed)


def test_every_start_of_the_job_goes_through_the_startup_assembly() -> None:
    """`run`, a promote's catch-up and a failback's reverse run start the job one way: the job is made in
    streaming.startup alone."""
    makers = {m for m, found in IMPORTS.items()
              if "streaming.job.runner" in found and not m.startswith("streaming.job.")}
    assert makers == {"streaming.startup.assembly"}, makers
