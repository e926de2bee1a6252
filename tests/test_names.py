"""names_text: a whole cluster's topics in one line."""

from streaming.names import names_text


def test_a_long_list_reads_as_its_first_names_and_how_many_more() -> None:
    assert names_text([f"t{i}" for i in range(400)]) == "t0, t1, t2 and 397 more"
    assert names_text(["a", "b"]) == "a, b"
