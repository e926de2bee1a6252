"""Figures as a person reads them on a terminal: a config's duration as Kafka users say it (7d, 65s), sizes in
binary units, and measured values to three significant digits. JSON output keeps the exact values."""

from __future__ import annotations

from streaming.configuration.settings import LONG_MAX


def duration_text(ms: int | None) -> str:
    """7d, 1h, 65s, 250ms; Long.MAX_VALUE (Kafka's "no bound") is unbounded."""
    if ms is None or ms >= LONG_MAX:
        return "unbounded"
    for unit, size in (("d", 86_400_000), ("h", 3_600_000), ("min", 60_000), ("s", 1000)):
        if ms >= size and ms % size == 0:
            return f"{ms // size}{unit}"
    return f"{ms}ms" if ms < 1000 else f"{ms / 1000:g}s"


def bytes_text(n: int) -> str:
    """1 GiB, 512 KiB, 100 B."""
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.3g} {unit}"
    return f"{n} B"


def number_text(x: float) -> str:
    """A measured value to three significant digits, whole numbers with thousands separators."""
    if float(x).is_integer():
        return f"{int(x):,}"
    return f"{x:.3g}" if abs(x) < 1000 else f"{x:,.0f}"
