"""Which topics a job mirrors and what their sinks are called: refused in one line when they cannot work."""

from __future__ import annotations

import pytest

from streaming.errors import UsageError
from streaming.job.topics import SinkNaming, TopicSelection


def test_a_pattern_matches_whole_names_and_never_internal_topics() -> None:
    s = TopicSelection(pattern=r"orders\..*")
    assert s.matches("orders.eu") and not s.matches("old-orders.eu") and not s.matches("orders")
    assert not TopicSelection(pattern=".*").matches("__consumer_offsets")
    assert TopicSelection(("b", "a")).to_doc() == TopicSelection(("a", "b", "a")).to_doc() == {"names": ["a", "b"]}


@pytest.mark.parametrize("names,pattern,message", [
    ((), None, "--source-topic"), (("a",), "a.*", "not both"), ((), "(open", "not a regular expression")])
def test_a_selection_needs_exactly_one_valid_form(names, pattern, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        TopicSelection(names, pattern)


def test_a_template_names_each_sink_and_a_fixed_name_serves_one_topic() -> None:
    assert SinkNaming.of(None, "{topic}.compacted", TopicSelection(pattern=".*")).sink_of("orders") == \
        "orders.compacted"
    assert SinkNaming.of("out", None, TopicSelection(("orders",))).sink_of("orders") == "out"


@pytest.mark.parametrize("sink,template,selection,message", [
    (None, "compacted", TopicSelection(("a",)), "must contain {topic}"),
    ("out", None, TopicSelection(("a", "b")), "--sink-topic-template"),
    ("out", None, TopicSelection(pattern="a.*"), "--sink-topic-template"),
    ("out", "{topic}.c", TopicSelection(("a",)), "--sink-topic"),
    (None, "{topic}/c", TopicSelection(("a",)), "not a legal Kafka topic name"),
])
def test_sink_names_that_cannot_work_are_refused(sink, template, selection, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        SinkNaming.of(sink, template, selection)
