"""The Arrow types of Spark's Kafka columns that the Kafka source (streaming.spark.source.kafka_source) and the
state table (rows) both give. A module of its own, so Spark's planning process, which loads the Kafka source,
loads no more than these."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

HEADERS_TYPE = pa.list_(pa.field("element", pa.struct([("key", pa.string()), ("value", pa.binary())])))


def no_headers(n: int) -> pa.ListArray:
    """``n`` empty header lists, built from offsets alone (no Python list per row)."""
    return pa.ListArray.from_arrays(pa.array(np.zeros(n + 1, dtype=np.int32)), pa.array([], HEADERS_TYPE.value_type),
                                    type=HEADERS_TYPE)
