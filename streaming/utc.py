"""Times as every command shows them: UTC, to the second or to the millisecond, from Kafka's epoch ms."""

from __future__ import annotations

from datetime import datetime, timezone


def utc_text(ms: int, millis: bool = False) -> str:
    """``2026-11-24 06:11:04`` (``.123`` more with ``millis``); the caller says UTC where a reader needs it."""
    text = datetime.fromtimestamp(ms / 1000, timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")
    return text[:-3] if millis else text[:-7]


def utc_or_dash(ms: int | None) -> str:
    """A table cell: the time to the second, or "-" for one that has not happened."""
    return "-" if ms is None else utc_text(ms)
