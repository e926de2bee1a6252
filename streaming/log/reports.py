"""What a log's writer tells of its work: an append's counts, and what opening the log found wrong."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class AppendResult:
    appended: int = 0
    skipped: int = 0
    rolled: int = 0
    odd_timestamps: int = 0  # negative or too far ahead: their append time drives rolls and lags


@dataclass
class RecoveryReport:
    """What opening the log found wrong; empty when the newest manifest and its objects are intact."""

    invalid_manifests: list[str] = field(default_factory=list)  # newer than the one used, not readable
    damaged: dict[str, str] = field(default_factory=dict)  # segment -> what is wrong (never repaired)

    def __bool__(self) -> bool:
        return bool(self.invalid_manifests or self.damaged)
