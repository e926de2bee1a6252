"""Which of the two workers a test goes to (tests/workers.py), from what it uses."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace

import pytest

from tests.workers import built_ones_last, group_by_side, sides_of, without_group


@dataclass
class Collected:
    """What tests/workers.py reads of a collected test."""

    nodeid: str
    fixturenames: tuple[str, ...] = ()
    params: dict = field(default_factory=dict)
    markers: list = field(default_factory=list)

    @property
    def callspec(self) -> SimpleNamespace:
        return SimpleNamespace(params=self.params)

    def add_marker(self, marker) -> None:
        self.markers.append(marker)

    def get_closest_marker(self, name: str):
        return next((m for m in self.markers if m.name == name), None)


def test_a_test_goes_to_the_side_of_the_fixtures_it_uses() -> None:
    assert sides_of(Collected("a", ("tmp_path", "cluster_proxies"))) == {"cluster"}
    assert sides_of(Collected("b", ("bootstrap_servers",))) == {"broker"}
    assert sides_of(Collected("c", ("tmp_path",))) == frozenset()


def test_the_spark_session_is_each_workers_own_and_sends_a_test_nowhere() -> None:
    assert sides_of(Collected("a", ("spark", "cluster"))) == {"cluster"}
    assert sides_of(Collected("b", ("spark", "bootstrap_servers"))) == {"broker"}
    assert sides_of(Collected("c", ("spark",))) == frozenset()


def test_a_secured_parameter_names_the_side_itself() -> None:
    assert sides_of(Collected("a", ("request",), {"secured": "cluster"})) == {"cluster"}
    assert sides_of(Collected("b", ("request",), {"secured": "broker"})) == {"broker"}
    assert sides_of(Collected("c", ("request",), {"secured": "tls"})) == frozenset()


def test_a_test_using_both_sides_is_a_collection_error_naming_it() -> None:
    config = SimpleNamespace(pluginmanager=SimpleNamespace(hasplugin=lambda _name: True))
    with pytest.raises(pytest.UsageError, match="t.py::test_both"):
        group_by_side(config, [Collected("t.py::test_both", ("kafka_broker",), {"secured": "cluster"})])


def test_each_grouped_test_is_marked_with_its_side() -> None:
    config = SimpleNamespace(pluginmanager=SimpleNamespace(hasplugin=lambda _name: True))
    items = [Collected("a", ("cluster",)), Collected("b", ("tmp_path",))]
    group_by_side(config, items)
    assert [m.args for m in items[0].markers] == [("cluster",)] and items[1].markers == []


def test_only_the_group_suffix_leaves_a_test_id() -> None:
    assert without_group("t.py::test[a@b]@cluster") == "t.py::test[a@b]"
    assert without_group("t.py::test[a@b]") == "t.py::test[a@b]"
    assert without_group("t.py::test@broker") == "t.py::test"


def test_the_tests_using_a_server_built_beside_them_go_last_in_their_order() -> None:
    items = [Collected("s1", ("s3_server", "cluster")), Collected("a", ("cluster",)), Collected("s2", ("s3_server",)),
             Collected("m", markers=[pytest.mark.minio.mark]), Collected("b", ("tmp_path",))]
    built_ones_last(items)
    assert [item.nodeid for item in items] == ["a", "b", "s1", "s2", "m"]
