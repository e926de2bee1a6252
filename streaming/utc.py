"""Times as every command shows them: UTC, to the second or to the millisecond, from Kafka's epoch ms."""

from __future__ import annotations

from datetime import datetime, timezone


def utc_text(ms: int, millis: bool = False) -> str:
    """``2026-11-24 06:11:04`` (``.123`` more with ``millis``); the caller says UTC where a reader needs it."""
    text = datetime.fromtimestamp(ms / 1000, timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")
    return text[:-3] if millis else text[:-7]


class Outage:
    """Since when something the job needs has kept failing: the first failure after the last success."""

    def __init__(self, since_ms: int | None = None) -> None:
        self.since_ms = since_ms

    def failed(self, now_ms: int, began_ms: int | None = None) -> str:
        """``since <time> UTC (<seconds>s)``, for the line that says the job waits; ``began_ms``: when the
        failure began, where that is known to be before ``now_ms`` (a call that has not answered yet)."""
        if self.since_ms is None:
            self.since_ms = now_ms if began_ms is None else began_ms
        return self.lasting(now_ms)

    def lasting(self, now_ms: int) -> str | None:
        """``since <time> UTC (<seconds>s)`` while the failure lasts, None otherwise; changes nothing."""
        if self.since_ms is None:
            return None
        return f"since {utc_text(self.since_ms)} UTC ({(now_ms - self.since_ms) / 1000:.0f}s)"

    def ended(self) -> None:
        self.since_ms = None


def utc_or_dash(ms: int | None) -> str:
    """A table cell: the time to the second, or "-" for one that has not happened."""
    return "-" if ms is None else utc_text(ms)
