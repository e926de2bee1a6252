"""The header that names the cluster a sink record came from, ``kcompact.origin`` (its cluster id, UTF-8), and
the rule it serves: a mirror never copies a record back to the cluster it came from.

A record keeps the origin its first mirror gave it (a record mirrored twice still names the cluster where it
was written), so a reverse mirror (the DR site back to the old primary, in failback), or two mirrors running
in opposite directions, leave out what the other side wrote there and nothing loops. A job within one
cluster leaves nothing out: nothing it emits crosses clusters, and the refusal of a sink that is one of its
sources keeps it from reading its own output. The native path adds the header in C
(``_rdkafka_columns.produce_rows``), held to the plain path by a test."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from streaming.log.columns import header_lists

ORIGIN_HEADER = "kcompact.origin"

Headers = Sequence[tuple[str, bytes | None]]


@dataclass(frozen=True)
class Origins:
    """The job's two clusters by id (as Kafka's DescribeCluster names them)."""

    source: str
    sink: str

    @property
    def source_value(self) -> bytes:
        """The header's value on a record that carries none of its own."""
        return self.source.encode()

    def origin_of(self, headers: Headers | None) -> bytes:
        """Where a record came from: its first origin header with a value, else the source cluster."""
        return next((v for k, v in headers or () if k == ORIGIN_HEADER and v is not None), self.source_value)

    def sink_headers(self, headers: Headers) -> list[tuple[str, bytes | None]]:
        """``headers`` with the origin header added unless they carry one (how either produce path writes it)."""
        own = any(k == ORIGIN_HEADER and v is not None for k, v in headers)
        return [*headers] if own else [*headers, (ORIGIN_HEADER, self.source_value)]

    def looped(self, headers: Headers | None) -> bool:
        """The record came from the sink's cluster: it is not emitted there again."""
        return self.source != self.sink and self.origin_of(headers) == self.sink.encode()

    def looped_rows(self, encoded: pa.Array) -> np.ndarray:
        """Indexes (ascending) of the looped records among a log batch's ``headers`` column (the log's Avro
        encoding): only records whose encoded headers hold both the header's name and the sink's id are
        decoded, so a batch of records written on the source costs one scan in Arrow."""
        if self.source == self.sink or len(encoded) == 0:
            return np.zeros(0, np.int64)
        named = pc.and_(pc.match_substring(encoded, ORIGIN_HEADER), pc.match_substring(encoded, self.sink))
        rows = np.flatnonzero(named.fill_null(False).to_numpy(zero_copy_only=False))
        if rows.size == 0:
            return rows
        decoded = header_lists(encoded.take(pa.array(rows)))
        return rows[np.fromiter((self.looped(h) for h in decoded), bool, rows.size)]
