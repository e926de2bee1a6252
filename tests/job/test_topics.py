"""Which topics a job mirrors and what their sinks are called: refused in one line when they cannot work."""

from __future__ import annotations

import pytest

from streaming.errors import UsageError
from streaming.job.topics import SinkNaming
from streaming.configuration.subscription import Subscribe, SubscribePattern, subscription_of


def test_a_pattern_matches_whole_names_and_never_internal_topics() -> None:
    s = SubscribePattern(r"orders\..*")
    assert s.matches("orders.eu") and not s.matches("old-orders.eu") and not s.matches("orders")
    assert not SubscribePattern(".*").matches("__consumer_offsets")
    assert Subscribe(("b", "a")).to_doc() == Subscribe(("a", "b", "a")).to_doc() == {"names": ["a", "b"]}


@pytest.mark.parametrize("names,pattern,message", [
    ((), None, "--source-topic"), (("a",), "a.*", "not both"), ((), "(open", "not a regular expression")])
def test_a_selection_needs_exactly_one_valid_form(names, pattern, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        subscription_of(names, pattern)


def test_a_template_names_each_sink_and_a_fixed_name_serves_one_topic() -> None:
    assert SinkNaming.of(None, "{topic}.compacted", SubscribePattern(".*")).sink_of("orders") == \
        "orders.compacted"
    assert SinkNaming.of("out", None, Subscribe(("orders",))).sink_of("orders") == "out"


@pytest.mark.parametrize("sink,template,selection,message", [
    (None, "compacted", Subscribe(("a",)), "must contain {topic}"),
    ("out", None, Subscribe(("a", "b")), "--sink-topic-template"),
    ("out", None, SubscribePattern("a.*"), "--sink-topic-template"),
    ("out", "{topic}.c", Subscribe(("a",)), "--sink-topic"),
    (None, "{topic}/c", Subscribe(("a",)), "not a legal Kafka topic name"),
])
def test_sink_names_that_cannot_work_are_refused(sink, template, selection, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        SinkNaming.of(sink, template, selection)
