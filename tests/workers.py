"""The suite runs on two pytest-xdist workers (scripts/test.sh), yet each session service must exist once: the
Docker engine and the session's broker in one worker, the three-node cluster, its proxies and the sink site
in the other. A test is sent to the worker holding what it uses (an xdist_group named here, from its
fixtures); a test using neither goes to whichever worker is free. The SparkSession is each worker's own,
started by the first test there that asks for it: a job run in the test's process starts no JVM of its own."""

from __future__ import annotations

import pytest

# The session's single broker: Docker's engine (one dockerd, started by one process) and the images.
BROKER_SIDE = frozenset({"kafka_broker", "bootstrap_servers", "docker_engine", "kafka_image", "kcompact_image"})
CLUSTER_SIDE = frozenset({"cluster", "cluster_broker", "cluster_proxies", "sink_site"})
SIDES = {"cluster": CLUSTER_SIDE, "broker": BROKER_SIDE}  # each xdist_group, by the fixtures that put a test in it
# Servers built beside the tests (scripts/test.sh): on a fresh machine MinIO's build ends minutes into the run.
# A test reaches it through the fixture, or says so with the mark.
BUILT_BESIDE = frozenset({"s3_server"})
BUILT_BESIDE_MARK = "minio"


def sides_of(item: pytest.Item) -> frozenset[str]:
    """Which workers' services a test uses, by its fixtures' names or, in tests/e2e/test_secured_cluster.py,
    by its ``secured`` parameter, which names the side."""
    names = set(getattr(item, "fixturenames", ()))
    by_parameter = getattr(getattr(item, "callspec", None), "params", {}).get("secured")
    return frozenset(side for side, fixtures in SIDES.items() if names & fixtures or by_parameter == side)


def without_group(nodeid: str) -> str:
    """A test's id without the "@side" xdist appends to a grouped test's (an "@" in a parameter stays)."""
    for side in SIDES:
        nodeid = nodeid.removesuffix(f"@{side}")
    return nodeid


def group_by_side(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark each test with its side; a test using both sides' services is a collection error naming it (its
    worker would start the other side's services a second time)."""
    both = [item.nodeid for item in items if len(sides_of(item)) > 1]
    if both:
        raise pytest.UsageError("tests that use both the session's broker and its cluster: " + "; ".join(both))
    if not config.pluginmanager.hasplugin("xdist"):  # -p no:xdist: one process holds every service anyway
        return
    for item in items:
        for side in sides_of(item):
            item.add_marker(pytest.mark.xdist_group(side))


def assert_grouped(session: pytest.Session) -> None:
    """In an xdist worker with --dist loadgroup, every grouped test's id must carry its group: pytest 9.2
    dropped the suffix xdist 3.8 sets, and then both workers would start every session service."""
    if not getattr(session.config.option, "loadgroup", False):
        return
    lost = [item.nodeid for item in session.items if sides_of(item) and without_group(item.nodeid) == item.nodeid]
    if lost:
        raise pytest.UsageError(f"pytest-xdist did not group {len(lost)} tests by the services they use "
                                f"(pytest {pytest.__version__}; see pyproject.toml), e.g. {lost[0]}")


def built_ones_last(items: list[pytest.Item]) -> None:
    """The tests using a server built beside the tests go to the end of the collection, in their order: a group's
    run after the group's others, a free one after the free others. The build is done by then, where a test
    near the start would hold its worker while the build runs."""
    items.sort(key=lambda item: bool(BUILT_BESIDE & set(getattr(item, "fixturenames", ()))
                                     or item.get_closest_marker(BUILT_BESIDE_MARK)))
