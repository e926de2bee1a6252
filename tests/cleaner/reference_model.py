"""The compaction rules in a few lines, as the reference the cleaner is tested against."""

from __future__ import annotations

MIN_LONG = -(2**63)


def rank(r: dict, strategy: str, header: str | None) -> tuple[int, int]:
    if strategy == "offset":
        return (0, r["offset"])
    if strategy == "timestamp":
        return (r["timestamp"], r["offset"])
    values = [h["value"] for h in r["headers"] if h["key"] == header]
    v = values[-1] if values else None
    version = int.from_bytes(v, "big", signed=True) if v is not None and len(v) == 8 else MIN_LONG
    return (version, r["offset"])


def clean(records: list[dict], first_dirty: int, end: int, now: int, retention: int, strategy: str,
          header: str | None) -> list[dict]:
    """The log after one pass over [log start, end) whose dirty part starts at first_dirty."""
    winner: dict[bytes, tuple[int, int]] = {}
    for r in records:
        if r["offset"] < end and r["key"] is not None:
            k = rank(r, strategy, header)
            winner[r["key"]] = max(winner.get(r["key"], k), k)
    out = []
    for r in records:
        r = dict(r)
        if r["offset"] < end:
            if r["key"] is None:
                if r["offset"] >= first_dirty:
                    continue
            elif rank(r, strategy, header) != winner[r["key"]]:
                continue
            if r["value"] is None and r["key"] is not None:
                if r["delete_horizon_ms"] is None:
                    r["delete_horizon_ms"] = now + retention
                elif now >= r["delete_horizon_ms"]:
                    continue
        out.append(r)
    return out
