"""The suite runs on two pytest-xdist workers (scripts/test.sh), yet each session service must exist once: the
Docker engine, the session's broker and the SparkSession in one worker, the three-node cluster, its proxies
and the sink site in the other. A test is sent to the worker holding what it uses (an xdist_group named
here, from its fixtures); a test using neither goes to whichever worker is free."""

from __future__ import annotations

import pytest

# The session's single broker: Docker's engine (one dockerd, started by one process) and the images, and the
# one SparkSession, which the tests beside that broker use.
BROKER_SIDE = frozenset({"kafka_broker", "bootstrap_servers", "docker_engine", "kafka_image", "kcompact_image",
                         "spark"})
CLUSTER_SIDE = frozenset({"cluster", "cluster_broker", "cluster_proxies", "sink_site"})
# tests/e2e/test_secured_cluster.py asks for either service by parameter, not by name
PARAMETER_SIDE = {"cluster": "cluster", "broker": "broker"}


def side_of(item: pytest.Item) -> str | None:
    """Which worker's services a test uses: "cluster", "broker" or None (any worker)."""
    names = set(getattr(item, "fixturenames", ()))
    by_parameter = PARAMETER_SIDE.get(getattr(getattr(item, "callspec", None), "params", {}).get("secured"))
    if names & CLUSTER_SIDE or by_parameter == "cluster":
        return "cluster"
    if names & BROKER_SIDE or by_parameter == "broker":
        return "broker"
    return None


def group_by_side(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark each test with its side; a test using both sides' services is a collection error naming it (its
    worker would start the other side's services a second time)."""
    both = [item.nodeid for item in items if set(getattr(item, "fixturenames", ())) & CLUSTER_SIDE
            and set(getattr(item, "fixturenames", ())) & BROKER_SIDE]
    if both:
        raise pytest.UsageError("tests that use both the session's broker and its cluster: " + "; ".join(both))
    if not config.pluginmanager.hasplugin("xdist"):  # -p no:xdist: one process holds every service anyway
        return
    for item in items:
        side = side_of(item)
        if side is not None:
            item.add_marker(pytest.mark.xdist_group(side))


def assert_grouped(session: pytest.Session) -> None:
    """In an xdist worker with --dist loadgroup, every grouped test's id must carry its group: pytest 9.2
    dropped the suffix xdist 3.8 sets, and then both workers would start every session service."""
    if not getattr(session.config.option, "loadgroup", False):
        return
    lost = [item.nodeid for item in session.items if side_of(item) and "@" not in item.nodeid]
    if lost:
        raise pytest.UsageError(f"pytest-xdist did not group {len(lost)} tests by the services they use "
                                f"(pytest {pytest.__version__}; see pyproject.toml), e.g. {lost[0]}")
