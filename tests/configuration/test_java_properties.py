"""Java's .properties form: which written values lost a backslash to the form's escaping."""

from __future__ import annotations

import io

import pytest

from streaming.configuration import java_properties


@pytest.mark.parametrize("line,value,lost", [
    ("p=orders\\..*", "orders..*", True),
    ("p=\\d+", "d+", True),
    ("p=orders\\\\..*", "orders\\..*", False),
    ("p = a\\tb", "a\tb", False),
    ("p: caf\\u00e9", "café", False),
    ("p=long\\\n    line", "longline", False),
    ("k\\=ey=v", "v", False),
])
def test_a_value_lost_backslashes_only_to_an_escape_that_means_nothing(line: str, value: str, lost: bool) -> None:
    (entry,) = java_properties.entries(io.StringIO(line + "\n"))
    assert (entry.value, entry.lost_backslashes) == (value, lost)
