"""The header every sink record carries: its source offset, ``kcompact.offset``, as ASCII decimal digits.

The sink is its own progress record (streaming.kafka.sink.task_emitter), so this one encoding is read back to resume;
the native path writes it in C (``_rdkafka_columns.produce_rows``), held to ``encode`` here by a test."""

from __future__ import annotations

from typing import Sequence

OFFSET_HEADER = "kcompact.offset"


def encode(offset: int) -> bytes:
    return b"%d" % offset


def source_offset(headers: Sequence[tuple[str, bytes | None]] | None) -> int | None:
    """The source offset a sink record's headers name (the last offset header, as a record carries its own
    headers before it), or None for a record that is not the job's."""
    for key, value in reversed(headers or ()):
        if key == OFFSET_HEADER and value is not None:
            return int(value.decode("ascii"))
    return None
