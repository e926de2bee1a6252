"""Many names in one line: a whole cluster's topics in a log line or an error must not be thousands long."""

from __future__ import annotations

from collections.abc import Sequence


def names_text(names: Sequence[str], shown: int = 3) -> str:
    """The first few names and how many more."""
    more = len(names) - shown
    return ", ".join(names[:shown]) + (f" and {more} more" if more > 0 else "")
