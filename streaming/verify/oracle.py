"""Whether a sink partition is right, judged from the source partition alone (kcompact verify).

The sink contract says what a sink partition holds once the compactor emitted up to source offset P (the
last kcompact.offset in it): for every key, its last sink record is the key's winner among the source
records at or below P, by the topic's strategy. A pass that covered P found every such winner and emitted it;
a record past P that won would have moved P. A tombstone and no record at all say the same thing (the key
is gone), so a tombstone the sink's broker removed after delete.retention.ms, or one the source's broker
removed, is no mismatch.

Each side is folded record by record into one entry per key (offset, version and a digest of the value),
so memory grows with the keys, never with the records.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Sequence

from streaming.cleaner.config import Strategy
from streaming.cleaner.strategy import header_version

NAMED = 5  # mismatches a partition's verdict names; the rest are counted
Headers = Sequence[tuple[str, bytes | None]]


def _digest(value: bytes | None) -> bytes | None:
    return None if value is None else hashlib.blake2b(value, digest_size=12).digest()


@dataclass(frozen=True)
class Kept:
    """What verify keeps of a record: where it is, how it ranks, and its value's digest (None: a tombstone)."""

    offset: int
    rank: tuple[int, int]
    value: bytes | None


class SourceWinners:
    """The winner of every key among the source records folded in, by the strategy's rank (version, offset)."""

    def __init__(self, strategy: Strategy = Strategy.OFFSET, header: str = "") -> None:
        self.strategy, self.header = strategy, header
        self.winners: dict[bytes, Kept] = {}
        self.records = 0
        self.keyless = 0
        self.first: int | None = None  # the lowest and highest offsets folded in
        self.last: int | None = None

    def add(self, key: bytes | None, value: bytes | None, timestamp_ms: int, headers: Headers | None,
            offset: int) -> None:
        self.records += 1
        self.first = offset if self.first is None else self.first
        self.last = offset
        if key is None:  # never compacted, never emitted as a winner (compaction.keyless.policy)
            self.keyless += 1
            return
        rank = self.rank(timestamp_ms, headers, offset)
        held = self.winners.get(key)
        if held is None or rank > held.rank:
            self.winners[key] = Kept(offset, rank, _digest(value))

    def rank(self, timestamp_ms: int, headers: Headers | None, offset: int) -> tuple[int, int]:
        return self._version(timestamp_ms, headers), offset

    def _version(self, timestamp_ms: int, headers: Headers | None) -> int:
        if self.strategy is Strategy.OFFSET:
            return 0
        if self.strategy is Strategy.TIMESTAMP:
            return timestamp_ms
        return header_version([{"key": k, "value": v} for k, v in headers or ()], self.header)[0]

    def digest(self) -> str:
        """A digest of the live winners (keys, offsets, values): equal on two runs that left the same state."""
        h = hashlib.sha256()
        for key in sorted(self.winners):
            kept = self.winners[key]
            if kept.value is not None:
                h.update(len(key).to_bytes(4, "big") + key + kept.offset.to_bytes(8, "big") + kept.value)
        return h.hexdigest()[:16]


class PendingWinners:
    """The source records past the sink's progress, against the winners judged up to it: the keys whose
    winner lies there are what the sink is still owed (not cleanable yet, or the job behind). A record past
    the progress that a lower version beats never reaches the sink, so it is not owed."""

    def __init__(self, judged: SourceWinners) -> None:
        self.judged = judged
        self.best: dict[bytes, tuple[int, int]] = {}
        self.records = 0

    def add(self, key: bytes | None, timestamp_ms: int, headers: Headers | None, offset: int) -> None:
        self.records += 1
        if key is None:
            return
        rank = self.judged.rank(timestamp_ms, headers, offset)
        if key not in self.best or rank > self.best[key]:
            self.best[key] = rank

    @property
    def owed(self) -> int:
        judged = self.judged.winners
        return sum(1 for key, rank in self.best.items() if key not in judged or rank > judged[key].rank)


@dataclass(frozen=True)
class SinkRecord:
    key: bytes | None
    value: bytes | None
    source_offset: int | None  # its kcompact.offset header; None when it has none
    sink_offset: int


@dataclass
class SinkLatest:
    """Every key's last record in a sink partition, and what breaks the order the contract promises."""

    latest: dict[bytes, Kept] = field(default_factory=dict)
    records: int = 0
    progress: int = -1  # the highest kcompact.offset seen: how far emission got
    faults: list[str] = field(default_factory=list)

    def add(self, r: SinkRecord) -> None:
        self.records += 1
        if r.source_offset is None:
            self.faults.append(f"sink offset {r.sink_offset} has no kcompact.offset header")
            return
        if r.source_offset <= self.progress:
            self.faults.append(f"sink offset {r.sink_offset}: kcompact.offset {r.source_offset} does not increase "
                               f"(after {self.progress})")
        self.progress = max(self.progress, r.source_offset)
        if r.key is not None:
            self.latest[r.key] = Kept(r.source_offset, (0, r.source_offset), _digest(r.value))


@dataclass(frozen=True)
class PartitionVerdict:
    source: str
    sink: str
    partition: int
    source_records: int       # source records checked: those at or below the sink's progress
    sink_records: int
    keys: int                 # keys among them (live or deleted)
    progress: int             # the last source offset the sink holds (-1: nothing emitted)
    mismatches: int
    named: tuple[str, ...]    # the first few mismatches, each naming its key
    unchecked: str | None     # the source range that could not be checked, and why
    digest: str
    source_end: int = 0       # the source partition's end (last stable offset) when it was read
    owed: int = 0             # keys whose winner lies past the progress: not in the sink yet

    @property
    def ok(self) -> bool:
        return self.mismatches == 0

    @property
    def behind(self) -> bool:
        """Right as far as it goes, but the source holds winners the sink has not been given yet."""
        return self.owed > 0

    def to_doc(self) -> dict:
        return {"source": self.source, "sink": self.sink, "partition": self.partition, "ok": self.ok,
                "behind": self.behind, "source_records": self.source_records, "sink_records": self.sink_records,
                "keys": self.keys, "progress": self.progress, "source_end": self.source_end, "owed": self.owed,
                "mismatches": self.mismatches, "named": list(self.named), "unchecked": self.unchecked,
                "digest": self.digest}

    def line(self) -> str:
        word = "FAIL" if not self.ok else "LAG " if self.behind else "ok  "
        lag = f", lag {self.owed:,} winners not in the sink yet" if self.behind else ", caught up"
        head = (f"{word} {self.source}-{self.partition} -> {self.sink}-{self.partition}: checked "
                f"{self.source_records:,} source records up to offset {self.progress} of the source's end "
                f"{self.source_end}{lag}; {self.keys:,} keys, {self.sink_records:,} sink records, {self.mismatches} "
                f"mismatches, winners {self.digest}")
        notes = [f"; {m}" for m in self.named] + ([f"; not checked: {self.unchecked}"] if self.unchecked else [])
        more = self.mismatches - len(self.named)
        return head + "".join(notes) + (f"; and {more} more" if more > 0 else "")


def _key_text(key: bytes) -> str:
    try:
        text = key.decode("utf-8")
    except UnicodeDecodeError:
        return "0x" + key.hex()
    return repr(text) if text.isprintable() else "0x" + key.hex()


def _state(kept: Kept | None) -> str:
    if kept is None:
        return "no record"
    return f"offset {kept.offset} ({'tombstone' if kept.value is None else 'value'})"


def judge(source_topic: str, sink_topic: str, partition: int, source: SourceWinners, sink: SinkLatest,
          log_start: int, unchecked: str | None = None, pending: PendingWinners | None = None,
          source_end: int = 0) -> PartitionVerdict:
    """Compare the winners of the source records at or below the sink's progress with the sink's latest
    records. A key the source no longer holds at all (its records below ``log_start``) is not judged."""
    found = list(sink.faults)
    for key in sorted(source.winners.keys() | sink.latest.keys()):
        want, got = source.winners.get(key), sink.latest.get(key)
        if want is None and got is not None and got.offset < log_start:
            continue  # the source deleted what this sink record came from: nothing to judge it by
        if (want is None or want.value is None) and (got is None or got.value is None):
            continue  # gone on both sides
        if want is None or got is None or want.offset != got.offset or want.value != got.value:
            differs = " (value differs)" if want and got and want.offset == got.offset else ""
            found.append(f"key {_key_text(key)}: source winner {_state(want)}, sink has {_state(got)}{differs}")
    return PartitionVerdict(source_topic, sink_topic, partition, source.records, sink.records, len(source.winners),
                            sink.progress, len(found), tuple(found[:NAMED]), unchecked, source.digest(), source_end,
                            0 if pending is None else pending.owed)
